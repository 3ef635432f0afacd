"""Idempotent message posts: the `Idempotency-Key` header (single and batch) and MCP's
`client_id`. A retry with the same key within 24 hours answers the messages stored the first
time and stores nothing again, also when the first answer was lost after the commit (issue
30, finding 17: a gunicorn killed after committing a batch, and the retry stored it twice)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import OperationalError, connection, connections
from django.test import Client
from django.utils import timezone

from memory import api as memory_api
from memory import idempotency
from memory.auth import api_key_create
from memory.messages import NewMessage, messages_add
from memory.models import IdempotencyKey, MainMessage
from tests.helpers import ROOT, database_url, last_line, manage, service_env
from tests.test_access_log import free_port, procfile_web_command, wait_for

pytestmark = pytest.mark.django_db

ONE = "/sessions/s1/messages"
BATCH = "/sessions/s1/messages:batch"
TEA = {"role": "user", "content": "I like green tea.", "metadata": {"mood": "calm"}}
TURNS = [
    {"role": "user", "content": "我喜欢喝绿茶"},
    {"role": "assistant", "content": "Noted: green tea."},
    {"role": "tool", "content": "ok", "msg_type": "fact"},
]


def post(api, path: str, body: Any, key: str | None) -> Any:
    """`api`'s POST with an Idempotency-Key header (none when key is None)."""
    headers = {**api.headers, **({"Idempotency-Key": key} if key is not None else {})}
    return api.client.post(
        f"/api/v1{path}", data=json.dumps(body), content_type="application/json", headers=headers
    )


def stored() -> list[tuple[str, str, str]]:
    return list(MainMessage.objects.order_by("id").values_list("agent_id", "session_id", "content"))


# --- REST ----------------------------------------------------------------------------------


def test_it_answers_a_retried_message_with_the_first_one_and_stores_it_once(api):
    first = post(api, ONE, TEA, "k-1")
    again = post(api, ONE, TEA, "k-1")

    assert first.status_code == again.status_code == 201, again.content
    assert again.json() == first.json()
    assert stored() == [("agent-a", "s1", "I like green tea.")]
    record = IdempotencyKey.objects.get()
    assert (record.agent_id, record.key, record.message_ids) == (
        "agent-a",
        "k-1",
        [first.json()["id"]],
    )


def test_it_answers_a_retried_batch_with_the_first_messages_in_their_order(api):
    first = post(api, BATCH, {"messages": TURNS}, "batch-1")
    again = post(api, BATCH, {"messages": TURNS}, "batch-1")

    assert first.status_code == again.status_code == 201, again.content
    assert again.json() == first.json()
    assert [m["content"] for m in again.json()["messages"]] == [t["content"] for t in TURNS]
    assert len(stored()) == 3


def test_without_a_key_a_retry_stores_again(api):
    assert post(api, ONE, TEA, None).status_code == 201
    assert post(api, ONE, TEA, None).status_code == 201

    assert len(stored()) == 2
    assert not IdempotencyKey.objects.exists()


def test_the_retry_answers_the_messages_as_they_are_now(api):
    """An embedding (or anything else stored since) shows in the retry's answer."""
    first = post(api, ONE, TEA, "k-1").json()
    MainMessage.objects.filter(pk=first["id"]).update(has_embedding=True)

    again = post(api, ONE, TEA, "k-1").json()

    assert again == {**first, "has_embedding": True}


def test_the_same_request_written_otherwise_is_the_same_request(api):
    """Key order and defaults left out do not make another request; a batch of one message
    is the single post of that message, answered in the batch's shape."""
    first = post(api, ONE, {"role": "user", "content": "hi"}, "k-1").json()

    spelt_out = post(api, ONE, {"msg_type": "normal", "content": "hi", "role": "user"}, "k-1")
    as_batch = post(api, BATCH, {"messages": [{"role": "user", "content": "hi"}]}, "k-1")

    assert spelt_out.status_code == 201 and spelt_out.json() == first
    assert as_batch.status_code == 201 and as_batch.json() == {"messages": [first]}
    assert len(stored()) == 1


REUSES = [
    pytest.param(ONE, {**TEA, "content": "I like black tea."}, id="other-content"),
    pytest.param(ONE, {**TEA, "metadata": {"mood": "tense"}}, id="other-metadata"),
    pytest.param(ONE, {**TEA, "role": "assistant"}, id="other-role"),
    pytest.param("/sessions/s2/messages", TEA, id="other-session"),
    pytest.param(BATCH, {"messages": [TEA, TEA]}, id="a-batch-of-more"),
]


@pytest.mark.parametrize(("path", "body"), REUSES)
def test_a_key_reused_for_another_request_answers_409_and_stores_nothing(api, path, body):
    post(api, ONE, TEA, "k-1")

    response = post(api, path, body, "k-1")

    assert response.status_code == 409
    assert response.json() == {
        "detail": "this idempotency key was used within the last 24 hours for a different "
        "request (another session or other messages); nothing was stored: use a new key for "
        "a new request",
        "errors": [],
    }
    assert stored() == [("agent-a", "s1", "I like green tea.")]
    assert IdempotencyKey.objects.count() == 1


@pytest.mark.parametrize(
    "key",
    ["", "k" * 201, "clé", "tab\tkey", "line\x7f"],
    ids=["empty", "201", "non-ascii", "tab", "del"],
)
def test_a_key_that_is_not_1_to_200_printable_ascii_characters_is_refused(api, key):
    response = post(api, ONE, TEA, key)

    assert response.status_code == 422
    message = "Idempotency-Key must be 1 to 200 printable ASCII characters"
    assert response.json()["errors"] == [{"loc": ["header", "Idempotency-Key"], "msg": message}]
    assert stored() == [] and not IdempotencyKey.objects.exists()


def test_a_key_of_200_printable_characters_is_taken(api):
    key = "".join(chr(32 + i % 95) for i in range(200))

    assert post(api, ONE, TEA, key).status_code == 201
    assert post(api, ONE, TEA, key).status_code == 201
    assert len(stored()) == 1


def test_an_invalid_body_with_a_key_records_nothing(api):
    response = post(api, BATCH, {"messages": [TEA, {"role": "user", "content": " "}]}, "k-1")

    assert response.status_code == 422
    assert stored() == [] and not IdempotencyKey.objects.exists()
    assert post(api, BATCH, {"messages": [TEA]}, "k-1").status_code == 201


def test_keys_are_each_agents_own(api_for):
    a, b = api_for("agent-a"), api_for("agent-b")

    first_a = post(a, ONE, TEA, "shared")
    first_b = post(b, ONE, {**TEA, "content": "B's own message"}, "shared")
    again_b = post(b, ONE, {**TEA, "content": "B's own message"}, "shared")

    assert first_a.status_code == first_b.status_code == again_b.status_code == 201
    assert again_b.json() == first_b.json() != first_a.json()
    assert stored() == [
        ("agent-a", "s1", "I like green tea."),
        ("agent-b", "s1", "B's own message"),
    ]
    assert IdempotencyKey.objects.filter(key="shared").count() == 2


def _age(**filters: Any) -> None:
    IdempotencyKey.objects.filter(**filters).update(
        created_at=timezone.now() - idempotency.WINDOW - timedelta(seconds=1)
    )


def test_a_key_older_than_24_hours_stores_again(api):
    first = post(api, ONE, TEA, "k-1").json()
    _age(key="k-1")

    again = post(api, ONE, TEA, "k-1")

    assert again.status_code == 201 and again.json()["id"] != first["id"]
    assert len(stored()) == 2
    # The expired record gave way to the new one, which answers the next retry.
    assert list(IdempotencyKey.objects.values_list("message_ids", flat=True)) == [
        [again.json()["id"]]
    ]
    assert post(api, ONE, TEA, "k-1").json() == again.json()


def test_a_key_just_under_24_hours_old_still_answers(api):
    first = post(api, ONE, TEA, "k-1").json()
    IdempotencyKey.objects.update(
        created_at=timezone.now() - idempotency.WINDOW + timedelta(minutes=1)
    )

    assert post(api, ONE, TEA, "k-1").json() == first
    assert len(stored()) == 1


def test_a_post_with_a_key_drops_its_agents_expired_records_alone(api_for):
    a, b = api_for("agent-a"), api_for("agent-b")
    for client, key in [(a, "old"), (a, "live"), (b, "old")]:
        post(client, f"/sessions/{key}/messages", TEA, key)
    _age(key="old")

    post(a, ONE, TEA, "new")

    assert sorted(IdempotencyKey.objects.values_list("agent_id", "key")) == [
        ("agent-a", "live"),
        ("agent-a", "new"),
        ("agent-b", "old"),
    ]


def test_a_retry_after_its_messages_were_deleted_answers_409_and_stores_nothing(api):
    post(api, BATCH, {"messages": TURNS}, "k-1")
    assert api.delete("/sessions/s1").status_code == 200

    response = post(api, BATCH, {"messages": TURNS}, "k-1")

    assert response.status_code == 409
    assert response.json()["detail"] == (
        "the messages first stored with this idempotency key have been deleted since; nothing "
        "was stored again"
    )
    assert stored() == []


def test_the_retry_after_an_answer_lost_past_the_commit_answers_the_same_messages(api, monkeypatch):
    """The batch commits, then the connection drops before the client reads the answer
    (here: the view fails after the flow returned). The retry stores nothing twice."""
    store = memory_api.messages_keep

    def commit_then_drop(**arguments: Any) -> Any:
        store(**arguments)
        raise ConnectionResetError("the client went away")

    monkeypatch.setattr(memory_api, "messages_keep", commit_then_drop)
    lost = post(api, BATCH, {"messages": TURNS}, "k-1")
    assert lost.status_code == 500
    committed = [row for row, *_ in MainMessage.objects.order_by("id").values_list("id")]
    monkeypatch.undo()

    retry = post(api, BATCH, {"messages": TURNS}, "k-1")

    assert retry.status_code == 201
    assert [m["id"] for m in retry.json()["messages"]] == committed
    assert len(stored()) == 3


def test_the_key_is_recorded_with_its_messages_or_not_at_all(api, monkeypatch):
    """A failure inside the transaction after the key's record was written leaves neither
    the record nor a message: the retry stores them."""

    def failing_settle(record: IdempotencyKey, messages: list[MainMessage]) -> None:
        raise RuntimeError("the process died here")

    monkeypatch.setattr(idempotency, "settle", failing_settle)
    assert post(api, BATCH, {"messages": TURNS}, "k-1").status_code == 500
    assert stored() == [] and not IdempotencyKey.objects.exists()
    monkeypatch.undo()

    assert post(api, BATCH, {"messages": TURNS}, "k-1").status_code == 201
    assert len(stored()) == 3


def test_a_message_kept_in_the_jsonl_backup_records_no_key(api, settings, tmp_path, monkeypatch):
    """The database is unavailable: the message goes to the backup (202) and the key cannot
    be recorded with it, so a retry once the database is back stores the message."""
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)

    def locked(**fields: Any) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr("memory.messages.messages_add", locked)
    kept = post(api, ONE, TEA, "k-1")
    monkeypatch.undo()

    assert kept.status_code == 202 and kept.json()["stored_in"] == "jsonl"
    assert not IdempotencyKey.objects.exists()
    assert post(api, ONE, TEA, "k-1").status_code == 201
    assert len(stored()) == 1


def test_the_flows_refuse_an_invalid_key(db):
    from memory.validation import InvalidInput

    with pytest.raises(InvalidInput, match="idempotency_key must be 1 to 200 printable ASCII"):
        messages_add(
            agent_id="a", session_id="s", messages=[NewMessage("user", "hi")], idempotency_key="\n"
        )
    assert stored() == []


# --- concurrent requests with one key ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_with_one_key_store_once_and_all_answer_the_same(monkeypatch):
    """Each request passes the look-up before any commits (a barrier holds them there): one
    inserts the key's record, the others fail on its unique constraint and answer its
    messages. On PostgreSQL too (make test's second pass): never a 500, never a duplicate."""
    requests = 6
    key = api_key_create(agent_id="agent-a")[1]
    barrier = threading.Barrier(requests)
    looked_up = threading.local()
    earlier_messages = idempotency.ClientKey.earlier_messages

    def after_everyone_looked(self: idempotency.ClientKey) -> Any:
        found = earlier_messages(self)
        if not getattr(looked_up, "done", False):
            looked_up.done = True
            barrier.wait(30)
        return found

    monkeypatch.setattr(idempotency.ClientKey, "earlier_messages", after_everyone_looked)
    answers: list[Any] = [None] * requests

    def request(number: int) -> None:
        try:
            answers[number] = Client().post(
                f"/api/v1{BATCH}",
                data=json.dumps({"messages": TURNS}),
                content_type="application/json",
                headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "k-1"},
            )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request, args=(n,)) for n in range(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert [answer.status_code for answer in answers] == [201] * requests
    bodies = [answer.json() for answer in answers]
    assert all(body == bodies[0] for body in bodies)
    assert [m["id"] for m in bodies[0]["messages"]] == list(
        MainMessage.objects.order_by("id").values_list("id", flat=True)
    )
    assert MainMessage.objects.count() == len(TURNS)
    assert IdempotencyKey.objects.count() == 1


# --- MCP's client_id -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_mcp_store_message_with_a_client_id_stores_once(live_server):
    from tests.test_mcp import call, error, result

    key = api_key_create(agent_id="agent-a")[1]
    arguments = {"session_id": "s1", "role": "user", "content": "I like green tea."}

    first = result(call(live_server.url, key, "store_message", **arguments, client_id="c-1"))
    again = result(call(live_server.url, key, "store_message", **arguments, client_id="c-1"))
    other = call(
        live_server.url, key, "store_message", **arguments | {"content": "x"}, client_id="c-1"
    )
    invalid = call(live_server.url, key, "store_message", **arguments, client_id="é")
    # The header and client_id share their keys: the API's retry of that message answers it.
    rest = httpx.post(
        f"{live_server.url}/api/v1/sessions/s1/messages",
        json={"role": "user", "content": "I like green tea."},
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "c-1"},
    )

    assert again == first
    assert rest.status_code == 201 and rest.json()["id"] == first["id"]
    assert "used within the last 24 hours for a different request" in error(other)
    assert "client_id must be 1 to 200 printable ASCII characters" in error(invalid)
    assert stored() == [("agent-a", "s1", "I like green tea.")]


# --- a real server killed after the commit -------------------------------------------------


@pytest.fixture
def service(request, tmp_path) -> tuple[dict[str, str], str]:
    """A service process's environment on the test's engine and a key of agent-a: on
    PostgreSQL the test database, on SQLite a migrated ORCA_HOME of its own."""
    if connection.vendor == "postgresql":
        env = service_env(
            tmp_path, ORCA_DATABASE_URL=database_url(), ORCA_EMBEDDING_PROVIDER="none"
        )
        return env, api_key_create(agent_id="agent-a")[1]
    manage(tmp_path, "migrate", "--no-input", ORCA_EMBEDDING_PROVIDER="none")
    key = last_line(manage(tmp_path, "create_api_key", "--agent", "agent-a"))
    return service_env(tmp_path, ORCA_EMBEDDING_PROVIDER="none"), key


def _start(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    # A session of its own, so that its workers die with it (SIGKILL to the group).
    return subprocess.Popen(
        procfile_web_command(f"127.0.0.1:{port}"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _send_without_reading(
    port: int, path: str, body: bytes, headers: dict[str, str]
) -> socket.socket:
    """A client that sends its request and never reads an answer (as one whose connection
    drops does)."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return sock


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_gunicorn_killed_after_committing_a_batch_stores_nothing_twice_on_the_retry(service):
    env, key = service
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Idempotency-Key": "batch-of-1000",
    }
    batch = {"messages": [{"role": "user", "content": f"message {n}"} for n in range(1000)]}
    body = json.dumps(batch).encode()
    listing = f"{base}/api/v1/sessions/s1/messages"

    server = _start(env, port)
    try:
        wait_for(f"{base}/api/v1/health", server)
        sock = _send_without_reading(port, "/api/v1" + BATCH, body, headers)
        # The other worker answers while the batch is written: kill all once it is committed.
        deadline = time.monotonic() + 120
        while httpx.get(listing, headers=headers, timeout=30).json().get("count", 0) < 1000:
            assert time.monotonic() < deadline, "the batch was not committed within 120 s"
            time.sleep(0.05)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)
        sock.close()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)

    server = _start(env, port)
    try:
        wait_for(f"{base}/api/v1/health", server)
        retry = httpx.post(f"{base}/api/v1{BATCH}", content=body, headers=headers, timeout=120)
        pages = [
            httpx.get(listing, headers=headers, params={"limit": 500, "offset": offset}).json()
            for offset in (0, 500)
        ]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)

    assert retry.status_code == 201, retry.text
    assert pages[0]["count"] == 1000
    listed = [m["id"] for page in pages for m in page["items"]]
    assert [m["id"] for m in retry.json()["messages"]] == listed
