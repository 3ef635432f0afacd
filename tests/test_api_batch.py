"""POST /sessions/{id}/messages:batch: many messages in one call, all or none, stored as one
message is (checks, token counts, backup, sub-agent rule, isolation), with the database's
contents checked after each call."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memory import jsonl, scheduling
from memory.models import MainMessage, ShortTermMemory
from memory.tokens import estimate_tokens
from tests.helpers import last_line, manage

pytestmark = pytest.mark.django_db

BATCH = "/sessions/s1/messages:batch"


def _turns(count: int) -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i} 你好"}
        for i in range(count)
    ]


def test_it_stores_a_batch_in_its_order_and_returns_the_rows(api):
    sent = [
        {"role": "user", "content": "我喜欢喝绿茶", "msg_type": "preference", "metadata": {"k": 1}},
        {"role": "assistant", "content": "Noted: green tea."},
        {"role": "tool", "content": "ok", "metadata": {"tool_call_id": "c1"}},
    ]

    response = api.post(BATCH, {"messages": sent})

    assert response.status_code == 201, response.content
    body = response.json()["messages"]
    rows = list(MainMessage.objects.order_by("id"))
    assert [m["id"] for m in body] == [row.pk for row in rows]
    assert [(r.agent_id, r.session_id, r.role, r.content) for r in rows] == [
        ("agent-a", "s1", m["role"], m["content"]) for m in sent
    ]
    assert [r.token_count for r in rows] == [estimate_tokens(m["content"]) for m in sent]
    assert [m["token_count"] for m in body] == [r.token_count for r in rows]
    assert (rows[0].msg_type, rows[0].metadata, rows[1].msg_type) == (
        "preference",
        {"k": 1},
        "normal",
    )
    assert all(m["timestamp"] and m["has_embedding"] is False for m in body)
    # The session reads back in the order sent.
    listed = api.get("/sessions/s1/messages").json()["items"]
    assert [m["content"] for m in listed] == [m["content"] for m in sent]


def test_it_stores_1000_messages_in_one_call(api):
    response = api.post(BATCH, {"messages": _turns(1000)})

    assert response.status_code == 201
    assert len(response.json()["messages"]) == 1000
    contents = list(MainMessage.objects.order_by("id").values_list("content", flat=True))
    assert contents == [m["content"] for m in _turns(1000)]


def test_it_refuses_1001_messages_and_stores_nothing(api):
    response = api.post(BATCH, {"messages": _turns(1001)})

    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body", "messages"]
    assert "at most 1000 items" in error["msg"]
    assert not MainMessage.objects.exists()


def test_it_refuses_an_empty_batch(api):
    response = api.post(BATCH, {"messages": []})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "messages"]


def test_one_bad_message_stores_nothing_and_the_422_names_its_index_and_field(api):
    sent = _turns(5)
    sent[3] = {"role": "robot", "content": "x"}

    response = api.post(BATCH, {"messages": sent})

    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body", "messages", 3, "role"]
    assert "messages.3.role" in response.json()["detail"]
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        # The schema's checks (content, role, type)...
        ({"role": "user", "content": "   "}, "content"),
        # ...and the flow's (the reserved metadata key, the size limit) each list them all.
        ({"role": "user", "content": "x", "metadata": {"subagent": {"forged": True}}}, "metadata"),
    ],
)
def test_every_message_at_fault_is_listed(api, bad, field):
    sent = _turns(6)
    sent[1] = sent[4] = bad

    response = api.post(BATCH, {"messages": sent})

    assert response.status_code == 422
    locs = [error["loc"] for error in response.json()["errors"]]
    assert locs == [["body", "messages", 1, field], ["body", "messages", 4, field]]
    assert not MainMessage.objects.exists()


def test_the_sub_agent_record_is_refused_as_for_one_message(api):
    forged = {"role": "tool", "content": "done", "metadata": {"subagent": {"parent_msg_id": 1}}}

    batch = api.post(BATCH, {"messages": [*_turns(2), forged]})
    single = api.post("/sessions/s1/messages", forged)

    assert (batch.status_code, single.status_code) == (422, 422)
    assert batch.json()["errors"][0]["msg"] == single.json()["errors"][0]["msg"]
    assert batch.json()["errors"][0]["loc"] == ["body", "messages", 2, "metadata"]
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize(
    ("message", "loc"),
    [
        ({"role": "user", "content": "nul \u0000 inside"}, ["content"]),
        ({"role": "user", "content": "lone surrogate \ud800"}, ["content"]),
        ({"role": "user", "content": "x", "metadata": {"a": "\u0000"}}, ["metadata"]),
        ({"role": "user", "content": 42}, ["content"]),
        ({"role": "user"}, ["content"]),
    ],
)
def test_hostile_messages_are_refused_with_their_index(api, message, loc):
    response = api.post(BATCH, {"messages": [*_turns(2), message]})

    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == ["body", "messages", 2, *loc]
    assert not MainMessage.objects.exists()


def test_non_finite_numbers_and_bad_shapes_are_refused(api):
    nan = b'{"messages": [{"role": "user", "content": "x", "metadata": {"n": NaN}}]}'
    assert api.post(BATCH, nan).json()["errors"][0]["loc"] == [
        "body",
        "messages",
        0,
        "metadata",
        "n",
    ]
    assert api.post(BATCH, {"messages": {"role": "user"}}).status_code == 422
    assert api.post(BATCH, [{"role": "user", "content": "x"}]).status_code == 400
    assert api.post(BATCH, "{not json").status_code == 400
    assert not MainMessage.objects.exists()


def test_content_over_the_limit_answers_413_with_its_index(api, settings):
    settings.ORCA = dataclasses.replace(settings.ORCA, max_content_bytes=30)
    sent = [{"role": "user", "content": "fits"}, {"role": "user", "content": "x" * 31}]

    response = api.post(BATCH, {"messages": sent})

    assert response.status_code == 413
    assert response.json()["errors"] == [
        {"loc": ["body", "messages", 1, "content"], "msg": "content is larger than 30 bytes"}
    ]
    assert not MainMessage.objects.exists()


def test_a_body_beyond_the_cap_answers_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post(BATCH, {"messages": _turns(100)})
    assert response.status_code == 413
    assert not MainMessage.objects.exists()


def test_a_bad_session_id_is_refused_once(api):
    response = api.post("/sessions/tab%09id/messages:batch", {"messages": _turns(3)})
    assert response.status_code == 422
    assert [error["loc"] for error in response.json()["errors"]] == [["path", "session_id"]]
    assert not MainMessage.objects.exists()


def test_a_batch_is_the_keys_agents_own(api_for):
    agent_a, agent_b = api_for("agent-a"), api_for("agent-b")
    agent_a.post("/sessions/s1/messages", {"role": "user", "content": "a's secret"})

    response = agent_b.post(BATCH, {"messages": _turns(3)})

    assert response.status_code == 201
    assert MainMessage.objects.filter(agent_id="agent-b", session_id="s1").count() == 3
    assert MainMessage.objects.filter(agent_id="agent-a").count() == 1
    seen_by_a = agent_a.get("/sessions/s1/messages").json()["items"]
    assert [m["content"] for m in seen_by_a] == ["a's secret"]
    seen_by_b = agent_b.get("/sessions/s1/messages").json()["items"]
    assert "a's secret" not in [m["content"] for m in seen_by_b]


def test_a_batch_needs_a_key(client):
    response = client.post(
        f"/api/v1{BATCH}", {"messages": _turns(1)}, content_type="application/json"
    )
    assert response.status_code == 401
    assert not MainMessage.objects.exists()


def test_embedding_and_summaries_are_queued_once_per_batch(
    api, monkeypatch, fake_embedder, django_capture_on_commit_callbacks
):
    queued: list[tuple[str, tuple]] = []
    monkeypatch.setattr(
        scheduling, "schedule_embedding", lambda **kw: queued.append(("embedding", ()))
    )
    real_summaries = scheduling.schedule_summaries

    def summaries(reply_ids):
        queued.append(("summaries", tuple(reply_ids)))
        real_summaries(reply_ids)

    monkeypatch.setattr(scheduling, "schedule_summaries", summaries)

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(BATCH, {"messages": _turns(6)})

    replies = [m["id"] for m in response.json()["messages"] if m["role"] == "assistant"]
    # One embedding run and one summary task for the batch; then the summaries the task
    # wrote ask for their vectors, once.
    assert queued == [("embedding", ()), ("summaries", tuple(replies)), ("embedding", ())]
    # The one task summarized each turn, as three single posts would have.
    summaries_of = ShortTermMemory.objects.order_by("id").values_list("reply_id", flat=True)
    assert list(summaries_of) == replies


def test_the_backup_keeps_a_batch_and_imports_nothing_twice(
    api, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    # Two identical messages in one call share their time: each keeps its own fingerprint.
    sent = [{"role": "user", "content": "ok"}, {"role": "user", "content": "ok"}, *_turns(2)]

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(BATCH, {"messages": sent})

    assert response.status_code == 201
    lines = jsonl.backup_path("agent-a", "s1").read_text().splitlines()
    assert len(lines) == 4
    fingerprints = set(MainMessage.objects.values_list("import_fingerprint", flat=True))
    assert len(fingerprints) == 4 and None not in fingerprints


@pytest.mark.slow
def test_a_batch_during_an_outage_goes_to_the_backup_and_only_it_comes_back(tmp_path):
    """Through processes, as an operator lives it: a batch stored with the backup on (repeated
    messages included), then one while the database cannot be opened (202, kept in the backup
    files); migrate_jsonl brings back the second alone."""
    good, broken = str(tmp_path / "good.db"), str(tmp_path / "broken.db")
    manage(tmp_path, "migrate", "--no-input", ORCA_DB_PATH=good)
    key = last_line(manage(tmp_path, "create_api_key", "--agent", "a1", ORCA_DB_PATH=good))
    (tmp_path / "broken.db").mkdir()  # a directory: SQLite cannot open it

    def post(contents: list[str], db: str) -> list:
        body = {"messages": [{"role": "user", "content": c} for c in contents]}
        script = (
            "import json; from django.test import Client; "
            "r = Client(SERVER_NAME='localhost').post('/api/v1/sessions/s1/messages:batch', "
            f"data={body!r}, content_type='application/json', "
            f"headers={{'Authorization': 'Bearer {key}'}}); "
            "print(json.dumps([r.status_code, r.json()]))"
        )
        return json.loads(
            last_line(
                manage(tmp_path, "shell", "-c", script, ORCA_DB_PATH=db, ORCA_JSONL_BACKUP="1")
            )
        )

    assert post(["ok", "ok", "stored"], good)[0] == 201
    status, body = post(["断网时的消息", "ok"], broken)
    assert (status, body["stored_in"]) == (202, "jsonl")

    folder = str(tmp_path / "data" / "jsonl" / "a1")
    back = manage(tmp_path, "migrate_jsonl", folder, "--agent", "a1", ORCA_DB_PATH=good)

    assert "imported 2, skipped 3" in back.stdout
    contents = "from memory.models import MainMessage as M; print(list(M.objects.order_by('id').values_list('content', flat=True)))"
    assert last_line(manage(tmp_path, "shell", "-c", contents, ORCA_DB_PATH=good)) == str(
        ["ok", "ok", "stored", "断网时的消息", "ok"]
    )


def test_with_the_task_queue_in_the_database_tasks_commit_with_the_messages(
    api, settings, fake_embedder
):
    from django.db import transaction
    from django_tasks_db.models import DBTaskResult

    from memory.messages import NewMessage, messages_add

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    with transaction.atomic():
        messages_add(agent_id="a1", session_id="s1", messages=[NewMessage("assistant", "hi")])
        transaction.set_rollback(True)  # the write fails: its tasks go with it
    assert not DBTaskResult.objects.exists()

    response = api.post(BATCH, {"messages": _turns(4)})

    replies = [m["id"] for m in response.json()["messages"] if m["role"] == "assistant"]
    queued = DBTaskResult.objects.order_by("enqueued_at")
    assert [(t.task_path, t.args_kwargs["args"]) for t in queued] == [
        (scheduling.EMBED_PENDING, []),
        (scheduling.SUMMARIZE_TURN, replies),
    ]


def test_no_embedding_run_is_queued_without_a_provider(api, settings):
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    api.post(BATCH, {"messages": _turns(2)})
    assert [t.task_path for t in DBTaskResult.objects.all()] == [scheduling.SUMMARIZE_TURN]


def test_one_message_is_a_batch_of_one_refused_as_itself(
    api, settings, tmp_path, django_capture_on_commit_callbacks
):
    """POST .../messages stores what a batch of one stores (row and backup line); what it
    refuses, it refuses as the message's own error, not as the list's."""
    from memory.messages import message_add
    from memory.validation import InvalidInput

    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    sent = {"role": "user", "content": "我住在里斯本", "msg_type": "fact", "metadata": {"x": 1}}

    with django_capture_on_commit_callbacks(execute=True):
        single = api.post("/sessions/s1/messages", sent).json()
        (batched,) = api.post(BATCH, {"messages": [sent]}).json()["messages"]

    shown = ("session_id", "role", "content", "msg_type", "token_count", "metadata")
    assert {k: single[k] for k in shown} == {k: batched[k] for k in shown}
    lines = [
        json.loads(line) for line in jsonl.backup_path("agent-a", "s1").read_text().splitlines()
    ]
    assert len(lines) == 2
    assert {k: v for k, v in lines[0].items() if k != "timestamp"} == {
        k: v for k, v in lines[1].items() if k != "timestamp"
    }
    with pytest.raises(InvalidInput) as refused:
        message_add(agent_id="a1", session_id="s1", role="user", content="x", msg_type="gossip")
    assert (type(refused.value), refused.value.field) == (InvalidInput, "msg_type")
    assert MainMessage.objects.count() == 2
