"""Messages and sessions through HTTP, with what the database holds afterwards."""

from __future__ import annotations

import dataclasses
import math

import pytest
from django.conf import settings

from memory import index
from memory.messages import message_add
from memory.models import LongTermMemory, MainMessage, ShortTermMemory
from memory.validation import InvalidInput
from subagents.models import SubagentMessage

pytestmark = pytest.mark.django_db


def test_it_stores_a_message_and_returns_the_row(api):
    response = api.post(
        "/sessions/s1/messages",
        {
            "role": "user",
            "content": "我喜欢喝绿茶",
            "msg_type": "preference",
            "metadata": {"k": [1]},
        },
    )

    assert response.status_code == 201
    body = response.json()
    row = MainMessage.objects.get()
    assert body["id"] == row.pk
    assert (row.agent_id, row.session_id, row.role, row.msg_type) == (
        "agent-a",
        "s1",
        "user",
        "preference",
    )
    assert body["token_count"] == row.token_count == 9  # 6 CJK characters x 1.5
    assert body["has_embedding"] is False
    assert body["timestamp"] and body["metadata"] == {"k": [1]} == row.metadata


def test_defaults_apply_when_optional_fields_are_left_out(api):
    body = api.post("/sessions/s1/messages", {"role": "assistant", "content": "ok then"}).json()
    assert (body["msg_type"], body["metadata"]) == ("normal", None)


@pytest.mark.parametrize(
    "payload",
    [
        {"role": "robot", "content": "x"},
        {"role": "user", "content": "x", "msg_type": "gossip"},
        {"role": "user", "content": "x", "metadata": [1, 2]},
        {"role": "user", "content": "x", "metadata": "text"},
        {"role": "user", "content": ""},
        {"role": "user", "content": "   "},
        {"role": "user", "content": "nul \u0000 inside"},
        {"role": "user", "content": "lone surrogate \ud800"},
        {"role": "user", "content": "x", "metadata": {"a": "\u0000"}},
        {"role": "user"},
        {"content": "x"},
        {"role": "user", "content": 42},
    ],
)
def test_it_refuses_invalid_messages_with_422_and_stores_nothing(api, payload):
    response = api.post("/sessions/s1/messages", payload)
    assert response.status_code == 422, response.content
    assert "detail" in response.json()
    assert not MainMessage.objects.exists()


def test_it_refuses_invalid_utf8_bytes_with_422(api):
    body = b'{"role": "user", "content": "bad \xff\xfe bytes"}'
    response = api.post("/sessions/s1/messages", body)
    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["loc"] == ["body", "content"]
    assert "unicode" in error["msg"]
    assert not MainMessage.objects.exists()


def test_it_refuses_deeply_nested_metadata(api):
    nested: dict = {}
    for _ in range(50):
        nested = {"a": nested}
    response = api.post(
        "/sessions/s1/messages", {"role": "user", "content": "x", "metadata": nested}
    )
    assert response.status_code == 422
    assert not MainMessage.objects.exists()


def test_it_refuses_a_body_that_is_not_json(api):
    response = api.post("/sessions/s1/messages", "{not json")
    assert response.status_code == 400
    assert response.json()["detail"] == "the body is not a JSON object"


@pytest.mark.parametrize("session_id", ["a%20", "%20a", "x" * 201, "tab%09id"])
def test_it_refuses_bad_session_ids(api, session_id):
    response = api.post(f"/sessions/{session_id}/messages", {"role": "user", "content": "x"})
    assert response.status_code == 422
    assert not MainMessage.objects.exists()


def test_it_answers_413_above_the_content_limit(api, settings):
    settings.ORCA = dataclasses.replace(settings.ORCA, max_content_bytes=30)
    fits = api.post(
        "/sessions/s1/messages", {"role": "user", "content": "十个汉字十个汉字十个"}
    )  # 30 bytes
    assert fits.status_code == 201
    response = api.post(
        "/sessions/s1/messages", {"role": "user", "content": "十个汉字十个汉字十个汉"}
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "content is larger than 30 bytes",
        "errors": [{"loc": ["body", "content"], "msg": "content is larger than 30 bytes"}],
    }
    assert MainMessage.objects.count() == 1


def test_it_answers_413_for_a_body_beyond_djangos_cap(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post("/sessions/s1/messages", {"role": "user", "content": "x" * 2000})
    assert response.status_code == 413
    assert response.json()["detail"] == "request body too large"
    assert not MainMessage.objects.exists()


def test_it_lists_sessions_newest_first_with_counts(api):
    for session, count in (("old", 2), ("new", 3)):
        for i in range(count):
            api.post(f"/sessions/{session}/messages", {"role": "user", "content": f"m{i}"})

    body = api.get("/sessions").json()

    assert body["count"] == 2
    assert [(s["session_id"], s["message_count"]) for s in body["items"]] == [
        ("new", 3),
        ("old", 2),
    ]
    first = body["items"][0]
    assert first["first_timestamp"] <= first["last_timestamp"]
    assert api.get("/sessions", limit=1, offset=1).json()["items"][0]["session_id"] == "old"


def test_it_lists_a_sessions_messages_oldest_first_paginated(api):
    for i in range(5):
        api.post("/sessions/s1/messages", {"role": "user", "content": f"message {i}"})
    api.post("/sessions/s2/messages", {"role": "user", "content": "elsewhere"})

    body = api.get("/sessions/s1/messages").json()
    assert body["count"] == 5
    assert [m["content"] for m in body["items"]] == [f"message {i}" for i in range(5)]
    page = api.get("/sessions/s1/messages", limit=2, offset=2).json()
    assert [m["content"] for m in page["items"]] == ["message 2", "message 3"]
    assert api.get("/sessions/nope/messages").status_code == 404
    assert api.get("/sessions/s1/messages", offset=2**64).status_code == 422


def test_deleting_a_session_removes_everything_hanging_from_it(api):
    parent = api.post(
        "/sessions/s1/messages", {"role": "assistant", "content": "calling coder"}
    ).json()
    api.post(
        f"/messages/{parent['id']}/subagent",
        {"agent_name": "coder", "role": "assistant", "content": "步骤"},
    )
    api.post(
        f"/messages/{parent['id']}/subagent/result", {"agent_name": "coder", "content": "done"}
    )
    ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content="summary")
    LongTermMemory.objects.create(
        agent_id="agent-a", content="learnt", memory_type="fact", source_session="s1"
    )
    kept = api.post("/sessions/s2/messages", {"role": "user", "content": "another session"}).json()
    index.vector_put(
        index.MESSAGE_VECTORS,
        row_id=parent["id"],
        agent_id="agent-a",
        embedding=[1.0] * settings.ORCA.embedding_dim,
        metadata={"session_id": "s1", "role": "assistant", "msg_type": "normal", "created_at": 0},
    )

    response = api.delete("/sessions/s1")

    assert response.status_code == 200
    body = response.json()
    assert (body["session_id"], body["deleted_messages"], body["deleted_summaries"]) == ("s1", 2, 1)
    receipt = body["receipt"]
    assert (receipt["scope"], receipt["session_id"], receipt["actor"]) == ("session", "s1", "api")
    assert receipt["counts"]["messages"] == 2 and receipt["counts"]["transcripts"] == 1
    assert receipt["ids"]["messages"] == sorted(receipt["ids"]["messages"])
    assert list(MainMessage.objects.values_list("id", flat=True)) == [kept["id"]]
    assert not SubagentMessage.objects.exists()
    assert not ShortTermMemory.objects.exists()
    # Made from the session alone (no source rows before migration 0023: its session).
    assert not LongTermMemory.objects.exists()
    assert (
        index.knn(
            index.MESSAGE_VECTORS,
            agent_id="agent-a",
            embedding=[1.0] * settings.ORCA.embedding_dim,
            k=5,
        )
        == []
    )
    assert index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query="calling", k=5) == []
    assert api.delete("/sessions/s1").status_code == 404


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_message_add_refuses_non_finite_metadata_before_writing(number):
    # What the importer and the admin call, whose JSON parsers read NaN and Infinity too.
    with pytest.raises(InvalidInput, match="finite"):
        message_add(
            agent_id="a1", session_id="s1", role="user", content="x", metadata={"a": [number]}
        )
    assert not MainMessage.objects.exists()


def test_it_answers_one_of_the_agents_messages_whole(api):
    """`GET /messages/{id}`: what a recalled line's `#id` points at, with all it was stored
    with, whatever its length (a context shows a long message cut)."""
    content = "我们去了湖边露营。" * 300 + " And then we went kayaking."
    stored = api.post(
        "/sessions/trip/messages",
        {"role": "user", "content": content, "msg_type": "fact", "metadata": {"k": [1]}},
    ).json()
    api.post("/sessions/trip/messages", {"role": "assistant", "content": "Lovely."})

    response = api.get(f"/messages/{stored['id']}")

    assert response.status_code == 200
    body = response.json()
    row = MainMessage.objects.get(pk=stored["id"])
    assert body == stored  # as the post answered it
    assert (body["content"], body["session_id"], body["role"], body["msg_type"]) == (
        content,
        "trip",
        "user",
        "fact",
    )
    assert body["token_count"] == row.token_count > 300
    assert body["metadata"] == {"k": [1]} and body["timestamp"].endswith("Z")


def test_another_agents_message_and_a_subagent_transcripts_are_not_found(api, api_for):
    """Only the agent's main messages: another agent's is a 404 in the one error shape, as
    one that does not exist, and so is a sub-agent's reply (it never enters the main
    conversation); the run's result, a message of the session, is found."""
    parent = api.post("/sessions/s1/messages", {"role": "assistant", "content": "ask coder"}).json()
    replies = [
        api.post(
            f"/messages/{parent['id']}/subagent",
            {"agent_name": "coder", "role": "assistant", "content": f"thinking {n}"},
        ).json()
        for n in range(3)
    ]
    result = api.post(
        f"/messages/{parent['id']}/subagent/result", {"agent_name": "coder", "content": "done"}
    ).json()
    # A reply's id that no main message has (the tables count their ids apart).
    main_ids = set(MainMessage.objects.values_list("id", flat=True))
    reply = next(r for r in replies if r["id"] not in main_ids)
    bob = api_for("bob")

    refused = [
        bob.get(f"/messages/{parent['id']}"),
        bob.get(f"/messages/{result['id']}"),
        api.get(f"/messages/{reply['id']}"),
        api.get(f"/messages/{max(main_ids) + 1}"),
    ]
    found = api.get(f"/messages/{result['id']}").json()

    assert [r.status_code for r in refused] == [404] * 4
    assert all(r.json() == {"detail": "Not Found", "errors": []} for r in refused)
    assert found["content"] == "done" and found["role"] == "tool"
    assert found["metadata"]["subagent"]["parent_msg_id"] == parent["id"]
    assert SubagentMessage.objects.count() == 3  # read, nothing changed
