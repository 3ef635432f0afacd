"""Copying a store to another database (issue 17), and migrating a database other than the
default, which the copy does to its target.

Each test copies the default database to the other engine and, for the round trip, back to
a third database of the default's engine: the SQLite pass goes SQLite -> PostgreSQL ->
SQLite, the PostgreSQL pass PostgreSQL -> SQLite -> PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connections
from django_tasks_db.models import DBTaskResult

from memory import copying, index, vectors
from memory.auth import api_key_create
from memory.copying import CopyError, attached, database_copy, target_settings
from memory.memories import memory_update
from memory.models import (
    ApiKey,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    ShortTermMemory,
)
from subagents.models import SubagentMessage
from tests.factories import add_message
from tests.helpers import database_url

pytestmark = pytest.mark.django_db(transaction=True)

COMPARED = [MainMessage, SubagentMessage, ShortTermMemory, LongTermMemory, LongTermMemoryHistory]


@pytest.fixture
def postgres_url() -> Callable[[str], str]:
    """postgres_url(name): a new, empty database on the tests' PostgreSQL server."""
    from tests.settings_postgres import _server  # started once, by whichever pass imports it

    def make(name: str) -> str:
        with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        return _server.get_uri(name)

    return make


def _on_postgres() -> bool:
    return connections["default"].vendor == "postgresql"


@pytest.fixture
def other_url(postgres_url, tmp_path) -> str:
    """An empty database of the other engine than the default's."""
    return str(tmp_path / "other.db") if _on_postgres() else postgres_url("copy_other")


@pytest.fixture
def same_url(postgres_url, tmp_path) -> str:
    """An empty database of the default's engine."""
    return postgres_url("copy_same") if _on_postgres() else f"sqlite:///{tmp_path / 'same.db'}"


@pytest.fixture
def store(conversation, fake_embedder):
    """The conversation fixture's store, with Chinese messages, an edited memory, a message
    dated before the session's last ones (a later id), a key, a user in a group, vectors."""
    add_message("我的偏好是喝绿茶，不喜欢咖啡。", agent_id="agent-a", session_id="s-zh")
    add_message("好的，我记住了你的偏好。", role="assistant", agent_id="agent-a", session_id="s-zh")
    add_message(
        "昨天我们讨论了部署。",
        agent_id="agent-a",
        session_id="s-zh",
        timestamp=datetime(2020, 1, 1, tzinfo=UTC),
    )
    # Dated before the two above, it belongs in their context: message_add does not index
    # them again (a back-dated message is rare), so do it here, as the admin does after an edit.
    index.reindex_messages(
        MainMessage.objects.filter(session_id="s-zh").values_list("pk", flat=True)
    )
    memory_update(conversation.tea, actor="api", content="The user prefers jasmine green tea.")
    api_key_create(agent_id="agent-a", name="laptop")
    user = User.objects.create_user("ana", password="pw")
    # get_or_create: a transactional test before this one flushed the groups migrations made.
    user.groups.add(Group.objects.get_or_create(name="orca viewers")[0])
    ConsolidationRun.objects.create(agent_id="agent-a", session_id="s-1", trigger="turns")
    vectors.embed_pending(embedder=fake_embedder)
    assert index.vectors_exist()
    return conversation


def _rows(model, using: str) -> list[tuple]:
    return list(model.objects.using(using).order_by("pk").values_list())


def _lexical(query: str, using: str) -> set[int]:
    hits = index.lexical_search(
        index.MESSAGE_TEXT, agent_id="agent-a", query=query, k=50, using=using
    )
    return {hit.id for hit in hits}


def _nearest(embedder, query: str, using: str) -> list[int]:
    hits = index.knn(
        index.MESSAGE_VECTORS,
        agent_id="agent-a",
        embedding=embedder.embed([query])[0],
        k=5,
        using=using,
    )
    # Equal scores (orthogonal texts) come in either order: sort them by id.
    return [hit.id for hit in sorted(hits, key=lambda hit: (-round(hit.score, 4), hit.id))]


def _assert_same_store(embedder, using: str) -> None:
    for model in COMPARED:
        assert _rows(model, using) == _rows(model, "default"), model.__name__
    assert list(ApiKey.objects.using(using).values_list("key_hash", "name")) == list(
        ApiKey.objects.values_list("key_hash", "name")
    )
    assert list(User.objects.using(using).get(username="ana").groups.values_list("name")) == [
        ("orca viewers",)
    ]
    for query in ("偏好", "部署", "gunicorn"):
        assert _lexical(query, using) == _lexical(query, "default") != set(), query
    for query in ("deploy Django with gunicorn", "green tea"):
        assert _nearest(embedder, query, using) == _nearest(embedder, query, "default") != []
    # The sequences follow the copied ids: a new row takes the next one.
    added = MainMessage.objects.using(using).create(
        agent_id="agent-a", session_id="s-new", role="user", content="next"
    )
    assert added.pk == MainMessage.objects.order_by("pk").last().pk + 1


def _fts_rows(using: str) -> list[tuple]:
    connection = connections[using]
    doc = "doc::text" if connection.vendor == "postgresql" else "body, cjk, ctx"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rowid, {doc} FROM fts_main_messages ORDER BY rowid")
        return cursor.fetchall()


def test_it_copies_a_store_to_the_other_engine_and_back(store, fake_embedder, other_url, same_url):
    out = StringIO()
    call_command("copy_database", to=other_url, verbosity=0, stdout=out)

    assert "verified: the row counts and SHA-256" in out.getvalue()
    assert f"main_messages: {MainMessage.objects.count()} rows" in out.getvalue()
    expected_fts = _fts_rows("default")
    with attached(target_settings(other_url), alias="there") as there:
        back = database_copy(to=same_url, source=there)
        _assert_same_store(fake_embedder, there)

    assert back.copied == back.rows > 0
    copied = {table.name for table in back.tables}
    assert {"subagent_messages", "api_keys", "auth_user_groups", "vec_main_messages"} <= copied
    assert not copied & {DBTaskResult._meta.db_table, "django_session"}
    with attached(target_settings(same_url), alias="back") as alias:
        # Same engine as the default: the lexical index itself is identical, context included.
        assert _fts_rows(alias) == expected_fts
        _assert_same_store(fake_embedder, alias)


def test_it_refuses_a_target_holding_another_store(store, other_url):
    with attached(target_settings(other_url), alias="foreign") as foreign:
        call_command("migrate", database=foreign, verbosity=0)
        MainMessage.objects.using(foreign).create(
            agent_id="x", session_id="x", role="user", content="someone else's"
        )

    with pytest.raises(CopyError, match="rows that are not this store's in .*main_messages"):
        database_copy(to=other_url)

    with attached(target_settings(other_url), alias="foreign") as foreign:
        assert _rows(MainMessage, foreign)[0][4] == "someone else's"
        assert MainMessage.objects.using(foreign).count() == 1
        assert not ApiKey.objects.using(foreign).exists()
        assert not User.objects.using(foreign).exists()


def test_it_resumes_a_copy_that_stopped(store, other_url, monkeypatch):
    monkeypatch.setattr(copying, "BATCH_SIZE", 2)
    write = copying.ModelPart.write
    calls = []

    def fail_on_the_second_batch_of_messages(part, rows, using):
        if part.name == "main_messages":
            calls.append(rows)
            if len(calls) == 2:
                raise RuntimeError("interrupted")
        write(part, rows, using)

    monkeypatch.setattr(copying.ModelPart, "write", fail_on_the_second_batch_of_messages)
    with pytest.raises(RuntimeError, match="interrupted"):
        database_copy(to=other_url)
    monkeypatch.setattr(copying.ModelPart, "write", write)
    with attached(target_settings(other_url), alias="partial") as partial:
        assert MainMessage.objects.using(partial).count() == 2  # the first batch, committed

    report = database_copy(to=other_url)
    again = database_copy(to=other_url)

    messages = {table.name: table for table in report.tables}["main_messages"]
    assert (messages.rows, messages.copied) == (MainMessage.objects.count(), messages.rows - 2)
    assert again.copied == 0 and again.rows == report.rows
    with attached(target_settings(other_url), alias="resumed") as resumed:
        for model in COMPARED:
            assert _rows(model, resumed) == _rows(model, "default")


def test_it_detects_a_source_written_during_the_copy(store, other_url, monkeypatch):
    reindex = copying.reindex_out_of_order

    def write_meanwhile(*, using: str) -> None:
        reindex(using=using)
        MainMessage.objects.filter(pk=store.ask.pk).update(content="changed meanwhile")

    monkeypatch.setattr(copying, "reindex_out_of_order", write_meanwhile)

    with pytest.raises(CopyError, match="main_messages differs after the copy"):
        database_copy(to=other_url)
    assert MainMessage.objects.get(pk=store.ask.pk).content == "changed meanwhile"


def test_it_refuses_to_copy_a_database_onto_itself(db):
    url = database_url() if _on_postgres() else str(connections["default"].settings_dict["NAME"])

    with pytest.raises(CopyError, match="the target is the source database"):
        database_copy(to=url)


def test_it_migrates_a_second_database_without_touching_the_default(tmp_path: Path):
    # Migration 0008 marks runs without a reason done; 0010 creates the dashboard's groups.
    run = ConsolidationRun.objects.create(agent_id="a", session_id="s", trigger="turns")
    Group.objects.filter(name="orca viewers").delete()

    with attached(target_settings(str(tmp_path / "second.db")), alias="second") as alias:
        call_command("migrate", database=alias, verbosity=0)
        assert Group.objects.using(alias).filter(name="orca viewers").exists()

    run.refresh_from_db()
    assert run.status == "queued"
    assert not Group.objects.filter(name="orca viewers").exists()
