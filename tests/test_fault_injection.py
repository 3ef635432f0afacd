"""Faults injected where the service writes: the database locked, full or gone, the disk full
under the JSONL backup, a write cut short, the task worker's database failing under it.

The promise under test: an acknowledged message is never lost (stored, or kept whole in the
JSONL backup and imported later), a refused one is refused cleanly (503 with Retry-After and
a sentence, never a bare 500), and no process stops because the database did. Extend this
module with every new finding of the kind: a row in OUTAGES for another way the database
fails, a test beside the ones here for another path that writes.

In process, `FailingSql` makes chosen statements fail as the driver would; the tests marked
slow hold a real SQLite write lock from another process, fill a real small disk where root
may mount one, and kill real workers.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import DatabaseError, OperationalError, ProgrammingError, connection
from django_tasks_db.models import DBTaskResult

from memory import auth, heartbeat, index, index_text, jsonl, vectors
from memory.auth import _write_mirror, agent_for_key, api_key_create, mirror_path
from memory.management.commands import db_worker
from memory.messages import message_update, messages_delete
from memory.models import ApiKey, LongTermMemory, MainMessage
from memory.tasks import OUTCOME_LOST
from subagents.models import SubagentMessage
from tests.factories import add_message
from tests.helpers import (
    last_line,
    manage,
    procfile_process,
    stop_group,
    worker_hanging_on_the_chat_model,
)
from tests.test_access_log import free_port, wait_for
from tests.test_mcp import rpc, send
from tests.worker_tasks import record_run

pytestmark = pytest.mark.django_db

DB_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


class FailingSql:
    """A fault: the statements matching `pattern` fail with `message`, as the driver would
    raise it, the first `times` times (every time when None). Install it with
    `connection.execute_wrapper(...)`."""

    def __init__(
        self,
        pattern: str,
        message: str,
        times: int | None = None,
        error: type[DatabaseError] = OperationalError,
    ) -> None:
        self.pattern = re.compile(pattern, re.IGNORECASE)
        self.message = message
        self.left = times
        self.error = error
        self.failed = 0

    def __call__(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if self.pattern.search(sql) and self.left != 0:
            self.left = None if self.left is None else self.left - 1
            self.failed += 1
            raise self.error(self.message)
        return execute(sql, *args)


# How the database fails (SQLite's own messages): each is an outage, answered 503 or kept.
OUTAGES = {
    "locked beyond the busy timeout": (
        "database is locked",
        "it is locked by another process for longer than the 10 s busy timeout",
    ),
    "disk full": ("database or disk is full", "its disk is full"),
    "cannot be opened": ("unable to open database file", "its file cannot be opened"),
    "I/O error": ("disk I/O error", "reading or writing its file failed (disk I/O error)"),
    "read-only": ("attempt to write a readonly database", "its file cannot be written"),
}
INSERT_MESSAGES = r'^INSERT INTO "main_messages"'
ONE = {"role": "user", "content": "我对花生过敏"}
BATCH = {"messages": [ONE, {"role": "assistant", "content": "记住了：花生过敏。"}]}


def sentence(why: str) -> str:
    """What a client is told of an outage; on PostgreSQL every OperationalError is the
    connection's (SQLite's messages mean nothing there)."""
    if connection.vendor != "sqlite":
        why = "the connection to it failed"
    return f"the database is unavailable: {why}. Nothing was changed; retry in 10 s"


def backup_on(settings, tmp_path: Path) -> Path:
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    return tmp_path / "jsonl" / "agent-a" / "s1.jsonl"


def kept_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def assert_unavailable(response, why: str) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "10"
    assert response.json() == {"detail": sentence(why), "errors": []}


# --- the message paths: kept in the backup, or refused with 503 ----------------------------


@pytest.mark.parametrize("outage", OUTAGES, ids=list(OUTAGES))
@pytest.mark.parametrize("path, body", [("messages", ONE), ("messages:batch", BATCH)])
def test_an_outage_keeps_the_messages_whole_in_the_backup(
    api, settings, tmp_path, outage, path, body
):
    backup = backup_on(settings, tmp_path)
    message, _ = OUTAGES[outage]

    with connection.execute_wrapper(FailingSql(INSERT_MESSAGES, message)):
        response = api.post(f"/sessions/s1/{path}", body)

    assert response.status_code == 202, response.content
    assert response.json()["stored_in"] == "jsonl"
    sent = body.get("messages", [body])
    assert [(line["role"], line["content"]) for line in kept_lines(backup)] == [
        (m["role"], m["content"]) for m in sent
    ]
    assert backup.read_bytes().endswith(b"\n")
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize("outage", OUTAGES, ids=list(OUTAGES))
@pytest.mark.parametrize("path, body", [("messages", ONE), ("messages:batch", BATCH)])
def test_without_the_backup_an_outage_is_a_503_to_retry(
    api, settings, tmp_path, outage, path, body
):
    settings.ORCA = dataclasses.replace(settings.ORCA, data_dir=tmp_path)
    message, why = OUTAGES[outage]

    with connection.execute_wrapper(FailingSql(INSERT_MESSAGES, message)):
        response = api.post(f"/sessions/s1/{path}", body)

    assert_unavailable(response, why)
    assert not MainMessage.objects.exists()
    assert not (tmp_path / "jsonl").exists()

    assert api.post(f"/sessions/s1/{path}", body).status_code == 201  # the retry it was told
    assert MainMessage.objects.count() == len(body.get("messages", [body]))


def test_a_database_error_that_is_no_outage_is_a_500_and_keeps_nothing(
    api, client, settings, tmp_path
):
    backup = backup_on(settings, tmp_path)
    client.raise_request_exception = False  # answered as in production

    # A missing table: SQLite's driver says so with an OperationalError, psycopg with another.
    fault = (
        FailingSql(INSERT_MESSAGES, "no such table: main_messages")
        if connection.vendor == "sqlite"
        else FailingSql(
            INSERT_MESSAGES, 'relation "main_messages" does not exist', error=ProgrammingError
        )
    )
    with connection.execute_wrapper(fault):
        response = api.post("/sessions/s1/messages", ONE)

    assert response.status_code == 500
    assert response.json() == {"detail": "internal server error", "errors": []}
    assert not backup.exists()  # a bug is not an outage: nothing is acknowledged


def existing_parent() -> MainMessage:
    return add_message("research gunicorn", agent_id="agent-a", session_id="s1")


# Writes that are not messages: refused with 503 during an outage (no backup keeps them).
OTHER_WRITES = [
    ("/memories", {"content": "likes tea", "memory_type": "preference"}, "long_term_memories"),
    (
        "/messages/{parent}/subagent",
        {"agent_name": "researcher", "role": "assistant", "content": "read the docs"},
        "subagent_messages",
    ),
    (
        "/messages/{parent}/subagent/result",
        {"agent_name": "researcher", "content": "use gunicorn"},
        "main_messages",
    ),
    ("/sessions/s1/end", None, "consolidation_runs"),
]


@pytest.mark.parametrize("path, body, table", OTHER_WRITES, ids=[w[0] for w in OTHER_WRITES])
def test_other_writes_during_an_outage_are_a_503_with_the_reason(api, path, body, table):
    parent = existing_parent()
    before = (MainMessage.objects.count(), SubagentMessage.objects.count())
    fault = FailingSql(rf'^(INSERT INTO|UPDATE) "{table}"', "database or disk is full")

    with connection.execute_wrapper(fault):
        response = api.post(path.format(parent=parent.pk), body)

    assert_unavailable(response, "its disk is full")
    assert (MainMessage.objects.count(), SubagentMessage.objects.count()) == before
    assert not LongTermMemory.objects.exists()


@pytest.mark.parametrize("retried", ["before the import", "after the import"])
def test_a_request_kept_during_an_outage_and_sent_again_is_stored_once(
    api, client, settings, tmp_path, retried
):
    """A 202 is an answer a client may not see: it sends the request again, with its
    Idempotency-Key, during the outage (kept twice) and after it (stored); migrate_jsonl
    stores the request once, whichever comes first."""
    from memory.jsonl_import import import_file

    backup = backup_on(settings, tmp_path)

    def post():
        return client.post(
            "/api/v1/sessions/s1/messages:batch",
            json.dumps(BATCH),
            content_type="application/json",
            headers={**api.headers, "Idempotency-Key": "turn-7"},
        )

    with connection.execute_wrapper(FailingSql(INSERT_MESSAGES, "database is locked")):
        assert post().status_code == 202
        assert post().status_code == 202  # the client's retry, still during the outage
    assert all(line["idempotency_key"] == "turn-7" for line in kept_lines(backup))
    if retried == "before the import":
        first = post()
        import_file(backup, agent_id="agent-a")
    else:
        import_file(backup, agent_id="agent-a")
        first = post()

    assert first.status_code == 201
    rows = list(MainMessage.objects.order_by("id").values_list("id", "content"))
    assert [content for _, content in rows] == [m["content"] for m in BATCH["messages"]]
    assert [m["id"] for m in first.json()["messages"]] == [pk for pk, _ in rows]
    assert post().json() == first.json()  # and any later retry answers the same


def test_a_context_during_an_outage_answers_without_counting_its_memories(api, caplog):
    from memory.memories import memory_create

    memory = memory_create(
        agent_id="agent-a", content="用户对花生过敏", memory_type="fact", actor="test"
    )
    add_message("晚饭吃什么？", agent_id="agent-a", session_id="s1")

    with connection.execute_wrapper(
        FailingSql(r'^UPDATE "long_term_memories"', "database is locked")
    ):
        response = api.post("/sessions/s1/context", {"query": "花生过敏"})

    assert response.status_code == 200
    assert "用户对花生过敏" in response.json()["messages"][0]["content"]
    memory.refresh_from_db()
    assert memory.access_count == 0  # bookkeeping, skipped: the context still answers
    assert "Skipped counting the memories' uses" in caplog.text


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_lock_held_elsewhere_skips_the_bookkeeping_and_the_context_and_message_answer(
    api, caplog
):
    """Outside a test's transaction SQLite takes the write lock at BEGIN IMMEDIATE: the
    bookkeeping's transaction cannot start while another process holds it. The context and
    the message are answered all the same; only the counts and the timestamp are skipped."""
    from memory.memories import memory_create

    memory = memory_create(
        agent_id="agent-a", content="用户对花生过敏", memory_type="fact", actor="test"
    )
    add_message("晚饭吃什么？", agent_id="agent-a", session_id="s1")
    (key,) = ApiKey.objects.all()
    auth._trusted.clear()
    # The driver's own module: another copy of SQLite in this process would not see its locks.
    holder = connection.Database.connect(
        str(connection.settings_dict["NAME"]), isolation_level=None
    )
    try:
        holder.execute("BEGIN IMMEDIATE")
        response = api.post("/sessions/s1/context", {"query": "花生过敏"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert response.status_code == 200
    assert "用户对花生过敏" in response.json()["messages"][0]["content"]
    memory.refresh_from_db()
    key.refresh_from_db()
    assert (memory.access_count, key.last_used_at) == (0, None)
    assert "Skipped counting the memories' uses" in caplog.text
    assert "Skipped recording an API key's use" in caplog.text


# --- MCP: the same, as tool results ---------------------------------------------------------


def store_call(**arguments: Any) -> bytes:
    call = {"name": "store_message", "arguments": {"session_id": "s1", **ONE, **arguments}}
    return rpc("tools/call", call)


def tool_result(response) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    return response.json()["result"]


def test_mcp_keeps_a_message_in_the_backup_during_an_outage(client, settings, tmp_path):
    backup = backup_on(settings, tmp_path)
    key = api_key_create(agent_id="agent-a")[1]

    with connection.execute_wrapper(FailingSql(INSERT_MESSAGES, "database is locked")):
        result = tool_result(send(client, store_call(), key))

    assert result["isError"] is False
    assert result["structuredContent"]["stored_in"] == "jsonl"
    assert [line["content"] for line in kept_lines(backup)] == [ONE["content"]]


@pytest.mark.parametrize(
    "call",
    [
        store_call(),
        rpc(
            "tools/call",
            {"name": "remember", "arguments": {"content": "x", "memory_type": "fact"}},
        ),
    ],
    ids=["store_message", "remember"],
)
def test_mcp_tells_an_outage_in_the_apis_sentence(client, settings, tmp_path, call):
    settings.ORCA = dataclasses.replace(settings.ORCA, data_dir=tmp_path)
    key = api_key_create(agent_id="agent-a")[1]

    with connection.execute_wrapper(FailingSql(r"^INSERT INTO", "database is locked")):
        result = tool_result(send(client, call, key))

    assert result["isError"] is True
    tool = json.loads(call)["params"]["name"]
    why = OUTAGES["locked beyond the busy timeout"][1]
    assert result["content"][0]["text"] == f"Error executing tool {tool}: {sentence(why)}"


# --- editing and deleting messages: one transaction, nothing half-written -------------------

# The last statement of both flows: the lexical index rows of the messages after the one edited
# or deleted (their ctx holds its text), made again once the message itself is written.
REINDEX = r"^UPDATE main_messages SET content = content"


def indexed(query: str) -> set[int]:
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=query, k=10)
    return {hit.id for hit in hits}


def turn() -> tuple[MainMessage, MainMessage]:
    return (
        add_message("Did you visit the aquarium yesterday?"),
        add_message("Yes, it was wonderful.", role="assistant"),
    )


@pytest.mark.parametrize("outage", OUTAGES, ids=list(OUTAGES))
def test_an_outage_during_a_message_edit_leaves_it_and_its_queue_as_they_were(settings, outage):
    settings.TASKS = DB_TASKS
    question, answer = turn()
    MainMessage.objects.filter(pk=question.pk).update(has_embedding=True)
    DBTaskResult.objects.all().delete()
    fields = ("content", "token_count", "has_embedding", "metadata")
    before = list(MainMessage.objects.order_by("id").values_list(*fields))
    fault = FailingSql(REINDEX, OUTAGES[outage][0])

    with connection.execute_wrapper(fault), pytest.raises(OperationalError):
        message_update(
            MainMessage.objects.get(pk=question.pk),
            content="Did you visit the planetarium yesterday?",
            metadata={"speaker": "Melanie"},
        )

    assert fault.failed == 1  # after the row was written and its embedding queued
    assert list(MainMessage.objects.order_by("id").values_list(*fields)) == before
    assert not DBTaskResult.objects.exists()
    assert indexed("aquarium") == {question.pk, answer.pk}
    assert indexed("planetarium") == indexed("Melanie") == set()


@pytest.mark.parametrize("outage", OUTAGES, ids=list(OUTAGES))
def test_an_outage_during_a_message_delete_keeps_the_messages_and_their_vectors(
    fake_embedder, outage
):
    question, answer = turn()
    vectors.embed_pending()
    probe = fake_embedder.embed(["aquarium"])[0]
    fault = FailingSql(REINDEX, OUTAGES[outage][0])

    with connection.execute_wrapper(fault), pytest.raises(OperationalError):
        messages_delete(messages=MainMessage.objects.filter(pk=question.pk))

    assert fault.failed == 1  # after the message and its vector were deleted
    assert set(MainMessage.objects.values_list("pk", flat=True)) == {question.pk, answer.pk}
    hits = index.knn(index.MESSAGE_VECTORS, agent_id="a1", embedding=probe, k=10)
    assert question.pk in {hit.id for hit in hits}
    assert indexed("aquarium") == {question.pk, answer.pk}


# --- the text change log: written by triggers in every message write -------------------------


def text_log() -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT agent_id, row_id FROM {index_text.CHANGES} ORDER BY id")
        return cursor.fetchall()


@pytest.fixture
def text_index(monkeypatch):
    """The derived text index answering an agent of 30 messages (20,000 in the service)."""
    monkeypatch.setattr(index_text, "MIN_ROWS", 30)
    index_text.clear()
    for n in range(30):
        add_message(f"glaze the bowl {n}", agent_id="agent-a")
    index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query="warm", k=1)
    index_text.settle()
    assert index_text.report().indexes == 1
    yield
    index_text.clear()


def found_by_the_index(query: str) -> set[int]:
    assert index_text.answers(index.MESSAGE_TEXT.name, session_id=None, filters=(), using="default")
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query=query, k=50)
    return {hit.id for hit in hits}


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_full_database_keeps_no_message_without_its_log_entry_and_loses_none(
    api, settings, tmp_path, text_index
):
    """A real SQLITE_FULL (the file may not grow) while a message, its FTS5 row and its log
    entry are written: kept whole in the backup (202), nothing of it in the database; imported
    once the disk has room, it is logged and found by every process's index."""
    backup = backup_on(settings, tmp_path)
    logged = text_log()
    large = "zymurgy " + " ".join(f"word{n}" for n in range(40_000))  # needs new pages
    with connection.cursor() as cursor:
        cursor.execute("VACUUM")  # no free page left by earlier tests to write it in
        cursor.execute("PRAGMA page_count")
        (pages,) = cursor.fetchone()
        cursor.execute(f"PRAGMA max_page_count = {pages}")
    try:
        response = api.post("/sessions/s9/messages", {"role": "user", "content": large})
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA max_page_count = 4294967294")

    assert response.status_code == 202, response.content
    assert [line["content"] for line in kept_lines(backup.with_name("s9.jsonl"))] == [large]
    assert not MainMessage.objects.filter(session_id="s9").exists()
    assert text_log() == logged
    assert found_by_the_index("zymurgy") == set()

    call_command("migrate_jsonl", str(backup.parent), "--agent", "agent-a", stdout=io.StringIO())

    (stored,) = MainMessage.objects.filter(session_id="s9")
    assert text_log()[len(logged) :] == [("agent-a", stored.pk)]
    assert found_by_the_index("zymurgy") == {stored.pk}


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_locked_database_writes_no_message_or_delete_without_its_log_entry(text_index):
    """Another connection holds the write lock beyond the busy timeout: a message written or
    deleted meanwhile fails whole, its log entry with it; done again after the lock, each is
    logged once and the index follows (the deleted message's text is gone at once)."""
    logged = text_log()
    (kept,) = MainMessage.objects.filter(content="glaze the bowl 7")
    # The driver's own module: another copy of SQLite in this process would not see its locks.
    holder = connection.Database.connect(
        str(connection.settings_dict["NAME"]), isolation_level=None
    )
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        (timeout,) = cursor.fetchone()
        cursor.execute("PRAGMA busy_timeout = 50")
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError, match="database is locked"):
            add_message("zymurgy", agent_id="agent-a", session_id="s9")
        with pytest.raises(OperationalError, match="database is locked"):
            messages_delete(messages=MainMessage.objects.filter(pk=kept.pk))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {timeout}")

    assert text_log() == logged
    assert found_by_the_index("zymurgy") == set()
    assert kept.pk in found_by_the_index("bowl 7")
    stored = add_message("zymurgy", agent_id="agent-a", session_id="s9")
    messages_delete(messages=MainMessage.objects.filter(pk=kept.pk))
    # Then the two after it, whose context held its text, reindexed.
    assert text_log()[len(logged) :][:2] == [("agent-a", stored.pk), ("agent-a", kept.pk)]
    assert found_by_the_index("zymurgy") == {stored.pk}
    assert kept.pk not in found_by_the_index("bowl 7")


def test_an_admin_edit_during_an_outage_fails_and_changes_nothing(admin_client):
    question, answer = turn()
    url = f"/admin/memory/mainmessage/{question.pk}/change/"
    form = {"content": "Did you visit the zoo?", "msg_type": "normal", "metadata": "null"}
    admin_client.raise_request_exception = False  # answered as in production

    with connection.execute_wrapper(FailingSql(REINDEX, "database is locked")):
        response = admin_client.post(url, form)

    assert response.status_code == 500
    assert MainMessage.objects.get(pk=question.pk).content == question.content
    assert indexed("zoo") == set()
    assert admin_client.post(url, form).status_code == 302  # the retry, once it is back
    assert indexed("zoo") == {question.pk, answer.pk}


# --- authentication writes nothing before the message is safe -------------------------------


def test_a_key_whose_bookkeeping_cannot_be_written_still_stores_the_message(api, caplog):
    (key,) = ApiKey.objects.all()
    with connection.execute_wrapper(FailingSql(r'^UPDATE "api_keys"', "database is locked")):
        response = api.post("/sessions/s1/messages", ONE)

    assert response.status_code == 201
    assert MainMessage.objects.count() == 1
    key.refresh_from_db()
    assert key.last_used_at is None  # the timestamp is lost, not the request
    assert "Skipped recording an API key's use" in caplog.text

    auth._trusted.clear()  # a second later: the key is looked up again
    api.post("/sessions/s1/messages", ONE)
    key.refresh_from_db()
    assert key.last_used_at is not None  # written after the next answer


def test_nothing_is_written_before_the_message_during_a_request(api):
    statements: list[str] = []

    def record(execute, sql, *args):
        statements.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(record):
        api.post("/sessions/s1/messages", ONE)

    writes = [s.split()[0:3] for s in statements if s.split()[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes[0] == ["INSERT", "INTO", '"main_messages"'], writes
    assert ["UPDATE", '"api_keys"', "SET"] in writes  # once answered


def test_a_key_deleted_in_the_admin_no_longer_works_while_the_database_is_down(
    admin_client, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.ORCA = dataclasses.replace(settings.ORCA, data_dir=tmp_path)
    row, key = api_key_create(agent_id="agent-a")
    _write_mirror()
    assert row.key_hash in json.loads(mirror_path().read_text())

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            f"/admin/memory/apikey/{row.pk}/delete/", {"post": "yes"}, follow=True
        )

    assert response.status_code == 200 and not ApiKey.objects.exists()
    assert row.key_hash not in json.loads(mirror_path().read_text())
    with connection.execute_wrapper(FailingSql(r'"api_keys"', "unable to open database file")):
        assert agent_for_key(key) is None


# --- the JSONL backup: whole lines, fsynced, or nothing -------------------------------------


def keep(count: int = 1, content: str = "断网时的消息") -> Path:
    return jsonl.fallback_append(
        agent_id="agent-a",
        session_id="s1",
        messages=[
            {"role": "user", "content": f"{content} {i}", "msg_type": "normal", "metadata": None}
            for i in range(count)
        ],
    )


def test_a_write_that_takes_several_calls_is_completed_and_fsynced(settings, tmp_path, monkeypatch):
    backup_on(settings, tmp_path)
    real_write, synced = os.write, []

    def short_write(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data[:100]))  # as a pipe or a signal can cut a write

    monkeypatch.setattr(jsonl.os, "write", short_write)
    monkeypatch.setattr(jsonl.os, "fsync", lambda fd: synced.append(fd))

    path = keep(8, "x" * 300)

    assert [line["content"] for line in kept_lines(path)] == [f"{'x' * 300} {i}" for i in range(8)]
    assert len(synced) == 2  # the file, and the folder of the new file


@pytest.mark.parametrize("written", [0, 8069], ids=["nothing written", "cut after 8,069 bytes"])
def test_a_full_disk_is_a_503_and_leaves_the_file_as_it_was(
    api, settings, tmp_path, monkeypatch, written
):
    backup = backup_on(settings, tmp_path)
    keep(1, "before the disk filled")
    before = backup.read_bytes()
    real_write = os.write

    def disk_fills(fd: int, data: bytes) -> int:
        if written:
            real_write(fd, bytes(data[:written]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(jsonl.os, "write", disk_fills)
    with connection.execute_wrapper(FailingSql(INSERT_MESSAGES, "database or disk is full")):
        response = api.post("/sessions/s1/messages:batch", {"messages": [ONE] * 8})

    assert response.status_code == 503
    assert response["Retry-After"] == "10"
    assert response.json()["detail"] == (
        "the database is unavailable and the JSONL backup could not keep the messages "
        "(No space left on device). Nothing was kept; retry in 10 s"
    )
    assert backup.read_bytes() == before  # no cut line left behind


def test_an_append_after_a_cut_line_starts_a_fresh_line_and_the_import_reads_around_it(
    settings, tmp_path
):
    from memory.jsonl_import import import_file

    backup_on(settings, tmp_path)
    path = keep(1, "first")
    with path.open("ab") as f:
        f.write(b'{"session_id": "s1", "role": "user", "content": "cut by a cr')  # no newline
    keep(2, "after")

    report = import_file(path, agent_id="agent-a")

    assert report.imported == 3
    assert sorted(MainMessage.objects.values_list("content", flat=True)) == [
        "after 0",
        "after 1",
        "first 0",
    ]
    ((number, reason),) = report.errors
    assert number == 2 and reason.startswith("cut off: the line ends before its JSON does")


def test_a_line_an_earlier_version_appended_onto_a_cut_one_is_imported(settings, tmp_path):
    from memory.jsonl_import import import_file

    backup_on(settings, tmp_path)
    path = keep(1, "first")
    swallowed = path.read_bytes()
    cut = b'{"session_id": "s1", "role": "user", "content": "cut by a full di'
    path.write_bytes(swallowed + cut + swallowed.replace(b"first", b"swallowed"))

    report = import_file(path, agent_id="agent-a")

    assert sorted(MainMessage.objects.values_list("content", flat=True)) == [
        "first 0",
        "swallowed 0",
    ]
    ((number, reason),) = report.errors
    assert number == 2 and "cut off" in reason and "the line appended onto it was read" in reason


# --- the task worker: never stopped by the database -----------------------------------------


def resilient_worker(**options: Any) -> db_worker.ResilientWorker:
    reported: list[str] = []
    worker = db_worker.ResilientWorker(
        report=reported.append,
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
        **options,
    )
    worker.reported = reported  # type: ignore[attr-defined]
    return worker


@pytest.fixture
def db_tasks(settings, tmp_path, monkeypatch):
    settings.TASKS = DB_TASKS
    settings.ORCA = dataclasses.replace(settings.ORCA, data_dir=tmp_path)
    monkeypatch.setattr(db_worker, "FIRST_WAIT_SECONDS", 0)
    monkeypatch.setattr(db_worker, "MOST_WAIT_SECONDS", 0)


TASK_TABLE = DBTaskResult._meta.db_table


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "failing",
    [
        (f'^SELECT .*"{TASK_TABLE}"', "database or disk is full", 3),
        pytest.param(
            ("^BEGIN", "database is locked", 3),
            marks=pytest.mark.sqlite_only,  # PostgreSQL's BEGIN is no statement of a cursor
        ),
        # django-tasks-db tries each of set_successful and set_failed 3 times: all 6 fail.
        (f'^UPDATE "{TASK_TABLE}" SET "status" = %s, "finished_at"', "disk I/O error", 6),
    ],
    ids=["claiming a task", "opening its transaction", "recording a task's end"],
)
def test_the_worker_backs_off_through_database_errors_and_runs_every_task(db_tasks, failing):
    record_run.enqueue(1)
    worker = resilient_worker()
    pattern, message, times = failing
    fault = FailingSql(pattern, message, times=times)

    with connection.execute_wrapper(fault):
        worker.run()

    assert fault.failed == times  # and the worker lived on
    assert worker.heart.last_error == f"OperationalError: {message}"
    assert MainMessage.objects.filter(content="run 1").exists()
    results = dict(DBTaskResult.objects.values_list("status", "exception_class_path"))
    assert results.get("SUCCESSFUL") == ""
    if "finished_at" in pattern:  # its end unrecorded: failed, and run again
        assert results["FAILED"] == OUTCOME_LOST
        assert any("interrupted by a database error" in line for line in worker.reported)


@pytest.mark.django_db(transaction=True)
def test_a_batch_worker_gives_up_in_the_end_with_the_error(db_tasks, monkeypatch):
    monkeypatch.setattr(db_worker, "BATCH_GIVES_UP_SECONDS", 0)
    record_run.enqueue(1)
    worker = resilient_worker()

    fault = FailingSql(f'^SELECT .*"{TASK_TABLE}"', "database or disk is full")
    with connection.execute_wrapper(fault), pytest.raises(OperationalError, match="disk is full"):
        worker.run()

    assert heartbeat.beats() == []  # and it stopped beating


def test_health_tells_whether_a_worker_runs_and_polls(client, db_tasks):
    def health() -> dict[str, Any]:
        response = client.get("/api/v1/health")
        assert response.status_code == 200  # a worker's trouble is not the database's
        return response.json()

    assert health()["worker"]["reason"] == (
        "no task worker has run with this data folder: nothing is embedded, summarized or "
        "consolidated (run manage.py db_worker)"
    )
    assert health()["status"] == "degraded"

    heart = heartbeat.Heart("w1")
    heart.beat()
    assert health()["worker"] | {"last_seen_at": None} == {
        "needed": True,
        "ok": True,
        "running": 1,
        "reason": None,
        "last_seen_at": None,
        "last_error": None,
        "last_error_at": None,
    }

    heart.failed("OperationalError: database is locked")
    report = health()
    assert report["worker"]["ok"] is False and report["status"] == "degraded"
    assert report["worker"]["reason"] == (
        "the task worker is backing off after a database error: "
        "OperationalError: database is locked"
    )

    long_ago = datetime.now(tz=UTC) - timedelta(minutes=5)
    heartbeat.write(heartbeat.Beat(worker_id="w1", pid=1, at=long_ago, state="polling"))
    assert health()["worker"]["reason"].startswith(
        f"no task worker seen since {long_ago.isoformat(timespec='seconds')}"
    )
    heart.stop()
    assert heartbeat.beats() == []


def test_without_a_task_queue_no_worker_is_needed(client):
    worker = client.get("/api/v1/health").json()["worker"]
    assert (worker["needed"], worker["ok"]) == (False, True)


# --- real processes: a lock held by another process, a real full disk, a killed worker ------

LOCK_SECONDS = 35


def hold_write_lock(db_path: Path, seconds: float) -> threading.Thread:
    """Another process's write lock (as a backup or a long import holds one) for `seconds`."""
    ready = threading.Event()

    def hold() -> None:
        with closing(sqlite3.connect(db_path, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            ready.set()
            time.sleep(seconds)
            db.execute("ROLLBACK")

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    ready.wait(10)
    return thread


@pytest.mark.slow
def test_a_lock_beyond_the_busy_timeout_loses_no_acknowledged_message_and_stops_no_process(
    tmp_path,
):
    """The issue's first finding, end to end: `make run`'s processes (the Procfile's web and
    worker lines), a write lock held 35 s by another process, posts during it from a key never
    used, a warm key and MCP; then the lock ends."""
    home = tmp_path / "orca"
    env = {"ORCA_JSONL_BACKUP": "1", "ORCA_EMBEDDING_PROVIDER": "none"}
    manage(home, "migrate", "--no-input", **env)
    warm = last_line(manage(home, "create_api_key", "--agent", "a1", **env))
    cold = last_line(manage(home, "create_api_key", "--agent", "a1", **env))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = procfile_process("web", home, ORCA_BIND=f"127.0.0.1:{port}", **env)
    worker = procfile_process("worker", home, **env)
    try:
        wait_for(f"{base}/api/v1/health", web)
        # The lock comes while both serve: a worker still starting (the Procfile's line runs
        # two commands before it) would only start later, and on a slow machine after the
        # health check below (CI failed so).
        wait_for_beat(home, lambda pid: True)
        headers = {"Authorization": f"Bearer {warm}"}
        first = {"role": "user", "content": "before the lock"}
        assert (
            httpx.post(
                f"{base}/api/v1/sessions/s1/messages", json=first, headers=headers
            ).status_code
            == 201
        )

        answers: dict[str, httpx.Response] = {}

        took: dict[str, float] = {}

        def post(name: str, path: str, body: dict[str, Any], key: str) -> None:
            sent = time.monotonic()
            answers[name] = httpx.post(
                f"{base}{path}",
                json=body,
                headers={
                    "Authorization": f"Bearer {key}",
                    "Accept": "application/json, text/event-stream",
                },
                timeout=60,
            )
            took[name] = time.monotonic() - sent

        lock = hold_write_lock(home / "data" / "orca.db", LOCK_SECONDS)
        started = time.monotonic()
        posts = [
            threading.Thread(
                target=post,
                args=(
                    "cold single",
                    "/api/v1/sessions/s1/messages",
                    {"role": "user", "content": "冷钥匙的消息"},
                    cold,
                ),
            ),
            threading.Thread(
                target=post,
                args=(
                    "warm batch",
                    "/api/v1/sessions/s2/messages:batch",
                    {"messages": [{"role": "user", "content": f"batch {i}"} for i in range(3)]},
                    warm,
                ),
            ),
        ]
        for thread in posts:
            thread.start()
        for thread in posts:
            thread.join()
        mcp = {
            "name": "store_message",
            "arguments": {"session_id": "s3", "role": "user", "content": "via MCP"},
        }
        post("mcp", "/mcp", json.loads(rpc("tools/call", mcp)), cold)
        during = time.monotonic() - started
        lock.join()

        assert answers["cold single"].status_code == 202, answers["cold single"].text
        assert answers["warm batch"].status_code == 202, answers["warm batch"].text
        kept_by_mcp = answers["mcp"].json()["result"]["structuredContent"]
        assert kept_by_mcp["stored_in"] == "jsonl", kept_by_mcp
        assert max(took.values()) < 15, took  # each within about the busy timeout
        assert during < LOCK_SECONDS  # all answered while the lock lasted
        time.sleep(2)
        assert web.poll() is None and worker.poll() is None  # both still serve
        health = httpx.get(f"{base}/api/v1/health").json()
        assert health["status"] != "error" and health["worker"]["running"] == 1

        manage(home, "migrate_jsonl", str(home / "data" / "jsonl" / "a1"), "--agent", "a1", **env)
        again = manage(
            home, "migrate_jsonl", str(home / "data" / "jsonl" / "a1"), "--agent", "a1", **env
        )
        assert "imported 0" in again.stdout
        rows = manage(
            home,
            "shell",
            "-c",
            "from memory.models import MainMessage as M; import json; print(json.dumps(sorted(M.objects.values_list('content', flat=True))))",
            **env,
        )
        assert json.loads(last_line(rows)) == sorted(
            ["before the lock", "冷钥匙的消息", "batch 0", "batch 1", "batch 2", "via MCP"]
        )
    finally:
        stop_group(web)
        stop_group(worker)


def rows(db_path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        return db.execute(sql).fetchall()


@pytest.mark.slow
def test_a_worker_killed_while_summarizing_a_turn_has_it_summarized_once_by_the_next(tmp_path):
    """The third task kind (embedding: tests/test_faults.py; consolidation:
    tests/test_worker_recovery.py): a worker killed (SIGKILL) inside a turn's summary."""
    home = tmp_path / "orca"
    db_path = home / "data" / "orca.db"
    offline = {"ORCA_EMBEDDING_PROVIDER": "none"}
    manage(home, "migrate", "--no-input", **offline)
    store_a_turn = (
        "from memory.messages import message_add\n"
        "message_add(agent_id='a1', session_id='s1', role='user', content='我想订去京都的票')\n"
        "message_add(agent_id='a1', session_id='s1', role='assistant', content='好的，几号出发？')"
    )
    manage(home, "shell", "-c", store_a_turn, **offline)
    task = f"SELECT status FROM {TASK_TABLE} WHERE task_path LIKE '%summarize_turn_task'"
    with worker_hanging_on_the_chat_model(home, **offline) as first:
        deadline = time.monotonic() + 90
        while rows(db_path, task) != [("RUNNING",)]:
            assert first.poll() is None and time.monotonic() < deadline, rows(db_path, task)
            time.sleep(0.2)
    summaries = "SELECT reply_id, content FROM short_term_memories"
    assert rows(db_path, summaries) == []

    second = manage(home, "db_worker", "--batch", "--no-startup-delay", **offline)
    third = manage(home, "db_worker", "--batch", "--no-startup-delay", **offline)

    assert "summarize_turn_task) was left running by worker" in second.stderr
    ((_, summary),) = rows(db_path, summaries)  # one, by the offline summarizer
    assert "我想订去京都的票" in summary
    assert "left running" not in third.stderr and len(rows(db_path, summaries)) == 1


@pytest.mark.slow
def test_make_runs_worker_is_started_again_when_it_dies_and_the_web_keeps_serving(tmp_path):
    home = tmp_path / "orca"
    env = {"ORCA_EMBEDDING_PROVIDER": "none"}
    manage(home, "migrate", "--no-input", **env)
    worker = procfile_process("worker", home, **env)
    try:
        first = wait_for_beat(home, lambda pid: True)
        os.kill(first, signal.SIGKILL)  # the worker process itself, not its shell
        second = wait_for_beat(home, lambda pid: pid != first)
        assert second != first and worker.poll() is None  # a new worker took its place
    finally:
        stop_group(worker)


def wait_for_beat(home: Path, wanted: Callable[[int], bool], seconds: float = 90) -> int:
    """The pid of a worker whose heartbeat `wanted`, once one beats."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pids = [beat.pid for beat in beats_in(home) if wanted(beat.pid)]
        if pids:
            return pids[0]
        time.sleep(0.3)
    raise AssertionError("no such worker started")


def beats_in(home: Path) -> list[heartbeat.Beat]:
    """The heartbeats in a service home of its own (not the tests' data folder)."""
    found = []
    for path in (home / "data" / "workers").glob("*.json"):
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found.append(
            heartbeat.Beat(
                raw["worker_id"], raw["pid"], datetime.fromisoformat(raw["at"]), raw["state"]
            )
        )
    return found


@pytest.mark.slow
def test_a_really_full_disk_acknowledges_only_what_it_kept(tmp_path):
    """A 1 MiB tmpfs as the data folder, the database gone: messages go to the backup until
    the disk is full, then 503; every 202 is imported after, whole."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()})")
    try:
        good = tmp_path / "good.db"
        manage(tmp_path, "migrate", "--no-input", ORCA_DB_PATH=str(good))
        key = last_line(
            manage(
                tmp_path,
                "create_api_key",
                "--agent",
                "a1",
                ORCA_DB_PATH=str(good),
                ORCA_DATA_DIR=str(disk),  # where the key mirror used during the outage is
            )
        )
        (
            disk / "broken.db"
        ).mkdir()  # SQLite cannot open a folder: every message goes to the backup
        script = FILL_THE_DISK.replace("KEY", key)
        outage = manage(
            tmp_path,
            "shell",
            "-c",
            script,
            ORCA_DB_PATH=str(disk / "broken.db"),
            ORCA_DATA_DIR=str(disk),
            ORCA_JSONL_BACKUP="1",
        )
        statuses = json.loads(last_line(outage))
        accepted = [i for i, status in enumerate(statuses) if status == 202]
        assert accepted and set(statuses[len(accepted) :]) == {503}, (
            statuses,
            outage.stderr[-2000:],
        )
        folder = disk / "jsonl" / "a1"
        assert all(path.read_bytes().endswith(b"\n") for path in folder.glob("*.jsonl"))
        imported = manage(
            tmp_path, "migrate_jsonl", str(folder), "--agent", "a1", ORCA_DB_PATH=str(good)
        )
        assert f"imported {len(accepted)}, 0 line(s) failed" in imported.stdout
    finally:
        subprocess.run(["umount", str(disk)], check=False)


FILL_THE_DISK = """
import json
from django.test import Client
client = Client(SERVER_NAME="localhost")
statuses = []
for i in range(400):
    response = client.post(
        "/api/v1/sessions/s1/messages",
        data={"role": "user", "content": f"{i} " + "满" * 1500},
        content_type="application/json",
        headers={"Authorization": "Bearer KEY"},
    )
    statuses.append(response.status_code)
    if response.status_code == 503 and len(statuses) > 3 and statuses[-3:] == [503] * 3:
        break
print(json.dumps(statuses))
"""
