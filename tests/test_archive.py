"""One agent's archive (`export_agent`, `import_agent`, GET /export, POST /import): every
table's rows come back equal, ids remapped, on either engine and across them."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError

from memory import archive, index, vectors
from memory.archive import AgentNotEmpty, ArchiveError, export_lines, import_archive, parts
from memory.memories import memory_create, memory_delete, memory_update
from memory.models import (
    RUN_NOTE,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    MemorySource,
    ShortTermMemory,
    VectorIndexState,
)
from memory.subagent_run import RUN_METADATA_KEY
from tests.factories import add_message
from tests.helpers import manage

# The columns that hold an id of another table (or of their own), per table: compared by the
# position of the row they name among the agent's rows of that table.
REFERENCES = {
    "main_messages": {},
    "subagent_messages": {"parent_msg_id": "main_messages"},
    "short_term_memories": {"reply_id": "main_messages"},
    "consolidation_runs": {
        "last_message_id": "main_messages",
        "last_summary_id": "short_term_memories",
    },
    "long_term_memories": {"superseded_by_id": "long_term_memories"},
    "long_term_memory_sources": {
        "memory_id": "long_term_memories",
        "message_id": "main_messages",
    },
    "long_term_memory_history": {"memory_id": "long_term_memories"},
}


@pytest.fixture
def store(conversation, fake_embedder):
    """agent-a with every kind of row: Chinese messages, a sub-agent run, a summary of a
    reply, a finished consolidation run named by a memory's history, a superseded memory,
    sources, an edited and a deleted memory (its history stays), and vectors."""
    add_message("我的偏好是喝绿茶，不喜欢咖啡。", agent_id="agent-a", session_id="s-zh")
    reply = add_message(
        "好的，我记住了你的偏好。", role="assistant", agent_id="agent-a", session_id="s-zh"
    )
    add_message(
        "昨天我们讨论了部署。",
        agent_id="agent-a",
        session_id="s-zh",
        timestamp=datetime(2020, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
    )
    ShortTermMemory.objects.create(
        agent_id="agent-a", session_id="s-zh", content="用户喜欢绿茶。", reply_id=reply.pk
    )
    run = ConsolidationRun.objects.create(
        agent_id="agent-a",
        session_id="s-zh",
        trigger="session_end",
        status="done",
        last_message_id=reply.pk,
        last_summary_id=conversation.summary.pk,
    )
    paris = memory_create(
        agent_id="agent-a",
        content="The user lives in Paris.",
        memory_type="fact",
        actor="consolidation",
        note={RUN_NOTE: run.pk},
    )
    berlin = memory_create(
        agent_id="agent-a", content="The user moved to Berlin.", memory_type="fact", actor="api"
    )
    LongTermMemory.objects.filter(pk=paris.pk).update(
        superseded_by=berlin, valid_until=datetime(2024, 6, 1, tzinfo=UTC)
    )
    MemorySource.objects.create(memory=paris, agent_id="agent-a", message=conversation.ask)
    MemorySource.objects.create(memory=berlin, agent_id="agent-a", written_by="api")
    memory_update(conversation.tea, actor="api", content="The user prefers jasmine green tea.")
    gone = memory_create(
        agent_id="agent-a", content="A memory deleted since.", memory_type="fact", actor="api"
    )
    memory_delete(gone, actor="api")
    vectors.embed_pending(embedder=fake_embedder)
    assert index.vectors_exist()
    return conversation


def _snapshot(agent_id: str, *, fingerprints: bool = True, embeddings: bool = True) -> dict:
    """Every row of the agent, table by table, with each id written as the position of the
    row it names among the agent's rows ("gone" and a number for rows no longer there)."""
    ids = {
        part.name: list(part.rows(agent_id).order_by("pk").values_list("pk", flat=True))
        for part in parts()
    }
    position = {name: {pk: n for n, pk in enumerate(pks)} for name, pks in ids.items()}
    gone: dict[tuple[str, int], int] = {}

    def ref(table: str, pk: Any) -> Any:
        if pk is None:
            return None
        if pk in position[table]:
            return ("row", position[table][pk])
        return ("gone", gone.setdefault((table, pk), len(gone)))

    snapshot = {}
    for part in parts():
        rows = []
        for row in part.rows(agent_id).order_by("pk").values():
            row = dict(row)
            row["id"] = ref(part.name, row["id"])
            row.pop("agent_id", None)
            for column, table in REFERENCES[part.name].items():
                row[column] = ref(table, row[column])
            if part.name == "main_messages":
                if not fingerprints:
                    row.pop("import_fingerprint")
                run = (row["metadata"] or {}).get(RUN_METADATA_KEY)
                if run:
                    run["parent_msg_id"] = ref("main_messages", run["parent_msg_id"])
            if part.name == "long_term_memory_history" and (row["changes"] or {}).get(RUN_NOTE):
                row["changes"][RUN_NOTE] = ref("consolidation_runs", row["changes"][RUN_NOTE])
            if not embeddings:
                row.pop("has_embedding", None)
            rows.append(row)
        if part.vectors is not None and embeddings:
            found = index.vectors_of(part.vectors, ids[part.name])
            rows.append(
                {"vectors": [(position[part.name][k], v) for k, v in sorted(found.items())]}
            )
        snapshot[part.name] = rows
    return snapshot


def _archive(agent_id: str) -> list[bytes]:
    return list(export_lines(agent_id))


def _found(query: str, agent_id: str) -> set[str]:
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id=agent_id, query=query, k=20)
    return set(
        MainMessage.objects.filter(pk__in=[h.id for h in hits]).values_list("content", flat=True)
    )


def test_it_imports_an_archive_into_a_store_with_data_under_a_new_agent(store):
    before = _snapshot("agent-a", fingerprints=False)
    assert before["long_term_memory_history"] and before["long_term_memory_sources"]

    report = import_archive(_archive("agent-a"), agent_id="agent-copy")

    assert _snapshot("agent-copy", fingerprints=False) == before
    assert _snapshot("agent-a", fingerprints=False) == before  # the source untouched
    assert report.vectors_reused and report.waiting_for_embedding == 0
    assert report.counts["main_messages"] == MainMessage.objects.filter(agent_id="agent-a").count()
    # New ids, every one above the store's others; the deleted memory's history names an id
    # no memory has.
    copied = MainMessage.objects.filter(agent_id="agent-copy")
    assert min(copied.values_list("pk", flat=True)) > max(
        MainMessage.objects.filter(agent_id="agent-a").values_list("pk", flat=True)
    )
    deleted = LongTermMemoryHistory.objects.get(agent_id="agent-copy", action=MemoryAction.DELETE)
    assert not LongTermMemory.objects.filter(pk=deleted.memory_id).exists()
    assert _found("偏好", "agent-copy") == _found("偏好", "agent-a") != set()
    # The back-dated message went in after the two it precedes: they hold it as context now.
    assert _found("部署", "agent-copy") == {"昨天我们讨论了部署。", *_found("偏好", "agent-a")}


def test_it_imports_an_archive_into_an_empty_store_as_it_was(store):
    lines = _archive("agent-a")
    before = _snapshot("agent-a")
    for part in reversed(parts()):
        part.model.objects.all().delete()
    ConsolidationRun.objects.all().delete()
    LongTermMemory.objects.all().delete()
    MainMessage.objects.all().delete()

    import_archive(lines)

    assert _snapshot("agent-a") == before  # import fingerprints kept under the same agent
    ts = MainMessage.objects.get(content="昨天我们讨论了部署。").timestamp
    assert ts == datetime(2020, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_it_refuses_to_import_an_archive_twice(store):
    lines = _archive("agent-a")
    import_archive(lines, agent_id="agent-copy")
    count = MainMessage.objects.count()

    with pytest.raises(AgentNotEmpty, match="'agent-copy' already holds data"):
        import_archive(lines, agent_id="agent-copy")
    with pytest.raises(AgentNotEmpty):
        import_archive(lines)  # agent-a itself
    assert MainMessage.objects.count() == count


def test_it_marks_rows_for_embedding_when_the_signature_differs(store):
    lines = _archive("agent-a")
    VectorIndexState.objects.filter(pk=1).update(model="another-model")

    report = import_archive(lines, agent_id="agent-copy")

    assert not report.vectors_reused
    copied = MainMessage.objects.filter(agent_id="agent-copy")
    assert not copied.filter(has_embedding=True).exists()
    assert report.waiting_for_embedding == copied.awaiting_embedding().count() + (
        ShortTermMemory.objects.filter(agent_id="agent-copy").count()
        + LongTermMemory.objects.filter(agent_id="agent-copy", archived_at__isnull=True).count()
    )
    assert index.vectors_of(index.MESSAGE_VECTORS, copied.values_list("pk", flat=True)) == {}


def test_it_leaves_nothing_when_the_database_fails_mid_import(store, monkeypatch):
    lines = _archive("agent-a")
    write = archive._Import.write

    def fail_at_the_history(self, part, batch):
        if part.name == "long_term_memory_history":
            raise DatabaseError("disk I/O error")
        write(self, part, batch)

    monkeypatch.setattr(archive._Import, "write", fail_at_the_history)

    with pytest.raises(DatabaseError):
        import_archive(lines, agent_id="agent-copy")
    assert archive.agent_holds_data("agent-copy") == {}
    assert not index.vectors_of(
        index.MEMORY_VECTORS,
        LongTermMemory.objects.values_list("pk", flat=True).filter(agent_id="agent-copy"),
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda lines: lines[:-1], "ends before its trailer"),
        (lambda lines: [b"{}\n", *lines[1:]], "line 1: not an orca-memory archive"),
        (lambda lines: [lines[0], b"[1]\n", *lines[1:]], "line 2: not a JSON object"),
        (lambda lines: [lines[0], b'{"table": "x"}\n'], "line 2: unknown table 'x'"),
        (
            lambda lines: [*lines[:2], lines[1], *lines[2:]],
            "line 3: main_messages: ids must ascend",
        ),
        (
            lambda lines: [lines[0], _edit(lines[1], role="robot"), *lines[2:]],
            "line 2: main_messages row \\d+: role: Value 'robot' is not a valid choice.",
        ),
        (
            lambda lines: [lines[0], _edit(lines[1], timestamp="yesterday"), *lines[2:]],
            "line 2: main_messages: timestamp must be an ISO 8601 time with its zone",
        ),
        (
            lambda lines: [lines[0], _edit(lines[1], extra=1), *lines[2:]],
            "line 2: main_messages: unknown columns extra",
        ),
        (lambda lines: [lines[0], *lines[2:]], "the trailer counts \\d+ main_messages"),
    ],
)
def test_it_refuses_a_broken_archive_and_imports_nothing(store, change, message):
    lines = change(_archive("agent-a"))

    with pytest.raises(ArchiveError, match=message):
        import_archive(lines, agent_id="agent-copy")
    assert archive.agent_holds_data("agent-copy") == {}


def _edit(line: bytes, **values: Any) -> bytes:
    item = json.loads(line)
    item["row"].update(values)
    return json.dumps(item).encode() + b"\n"


def test_the_commands_export_and_import(store, tmp_path):
    path = tmp_path / "a.jsonl"
    out = StringIO()
    call_command("export_agent", "agent-a", str(path), stdout=out)
    assert f"to {path}" in out.getvalue()
    assert (path.stat().st_mode & 0o777) == 0o600

    call_command("import_agent", str(path), agent="agent-b2", stdout=out)
    assert "Imported into agent 'agent-b2'" in out.getvalue()
    assert "Vectors kept; 0 row(s) wait" in out.getvalue()
    with pytest.raises(CommandError, match="already holds data.*nothing was imported"):
        call_command("import_agent", str(path), agent="agent-b2", stdout=out)


def test_the_api_exports_and_imports_the_keys_agent_only(store, api_for, client):
    api_a, api_b, api_new = api_for("agent-a"), api_for("agent-b"), api_for("agent-new")

    exported = api_a.get("/export")
    assert exported.status_code == 200
    assert exported["Content-Type"] == "application/x-ndjson"
    lines = list(exported.streaming_content)
    body = b"".join(lines)
    assert b"Deploys run on Fridays" not in body  # agent-b's memory
    assert b"agent-b" not in body
    assert lines[1:] == _archive("agent-a")[1:]  # the header's time aside

    refused = api_b._call("post", "/import", body, content_type="application/x-ndjson")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("agent 'agent-b' already holds data")

    done = api_new._call("post", "/import", body, content_type="application/x-ndjson")
    assert done.status_code == 201, done.json()
    assert done.json()["agent_id"] == "agent-new"
    assert (
        done.json()["counts"]["main_messages"]
        == MainMessage.objects.filter(agent_id="agent-a").count()
    )
    assert _snapshot("agent-new", fingerprints=False) == _snapshot("agent-a", fingerprints=False)

    broken = api_for("agent-other")._call(
        "post", "/import", body[:-5], content_type="application/x-ndjson"
    )
    assert broken.status_code == 422
    assert "line" in broken.json()["detail"]
    assert archive.agent_holds_data("agent-other") == {}

    anonymous = client.get("/api/v1/export")
    assert anonymous.status_code == 401


def test_the_api_refuses_an_archive_over_the_size_limit(store, api_for, settings):
    settings.ORCA = dataclasses.replace(settings.ORCA, max_import_bytes=100)
    body = b"".join(_archive("agent-a"))

    answer = api_for("agent-new")._call(
        "post", "/import", body, content_type="application/x-ndjson"
    )

    assert answer.status_code == 413
    assert answer.json()["errors"] == [
        {"loc": ["body"], "msg": "the archive is larger than max_import_bytes (100 bytes)"}
    ]
    assert archive.agent_holds_data("agent-new") == {}


@pytest.fixture
def postgres_url():
    """postgres_url(name): a new, empty database on the tests' PostgreSQL server."""
    import psycopg

    from tests.settings_postgres import _server  # started once, by whichever pass imports it

    def make(name: str) -> str:
        with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        return _server.get_uri(name)

    return make


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_it_moves_an_agent_to_the_other_engine_and_back(store, tmp_path, postgres_url, settings):
    """SQLite -> PostgreSQL -> SQLite (or the reverse on the PostgreSQL pass), through the
    commands run in a process of their own on the other engine."""
    there = tmp_path / "there.jsonl"
    back = tmp_path / "back.jsonl"
    Path(there).write_bytes(b"".join(_archive("agent-a")))
    home = tmp_path / "home"
    env = (
        {}
        if settings.DATABASES["default"]["ENGINE"] != "orca_memory.db"
        else {"ORCA_DATABASE_URL": postgres_url("archive_other")}
    )
    manage(home, "migrate", "--verbosity", "0", **env)
    manage(home, "import_agent", str(there), **env)
    manage(home, "export_agent", "agent-a", str(back), **env)

    with back.open("rb") as f:
        import_archive(f, agent_id="agent-back")

    # The other store had no vectors of this signature: the rows came back to be embedded.
    assert _snapshot("agent-back", fingerprints=False, embeddings=False) == _snapshot(
        "agent-a", fingerprints=False, embeddings=False
    )
    assert _found("偏好", "agent-back") == _found("偏好", "agent-a") != set()
