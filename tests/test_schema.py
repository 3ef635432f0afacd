"""The design's tables as the database sees them: defaults, CHECKs, cascade, pragmas."""

from __future__ import annotations

import pytest
from django.db import DataError, IntegrityError, connection, transaction

from memory import index
from memory.models import LongTermMemory, MainMessage, ShortTermMemory
from orca_memory.core.db.base import Driver
from subagents.models import SubagentMessage
from tests.helpers import manage

pytestmark = pytest.mark.django_db


def test_it_fills_database_defaults_for_plain_sql_inserts(sql):
    sql("INSERT INTO main_messages (session_id, role, content) VALUES ('s1', 'user', 'hi')")
    sql("INSERT INTO short_term_memories (session_id, content) VALUES ('s1', 'summary')")
    sql("INSERT INTO long_term_memories (content, memory_type) VALUES ('likes tea', 'preference')")

    message = MainMessage.objects.get()
    assert (message.agent_id, message.msg_type, message.token_count) == ("default", "normal", 0)
    assert message.has_embedding is False
    assert message.timestamp is not None
    summary = ShortTermMemory.objects.get()
    assert (summary.agent_id, summary.source_count, summary.confidence) == ("default", 1, 0.8)
    assert summary.created_at is not None
    memory = LongTermMemory.objects.get()
    assert (memory.agent_id, memory.confidence, memory.access_count) == ("default", 0.5, 0)
    assert memory.created_at is not None


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO main_messages (session_id, role, content) VALUES ('s', 'robot', 'x')",
        "INSERT INTO main_messages (session_id, role, content, msg_type) VALUES ('s', 'user', 'x', 'gossip')",
        "INSERT INTO main_messages (session_id, role, content, token_count) VALUES ('s', 'user', 'x', -1)",
        "INSERT INTO main_messages (session_id, role, content, metadata) VALUES ('s', 'user', 'x', '{bad')",
        "INSERT INTO main_messages (session_id, role) VALUES ('s', 'user')",
        "INSERT INTO short_term_memories (session_id, content, confidence) VALUES ('s', 'x', 1.5)",
        "INSERT INTO short_term_memories (session_id, content, confidence) VALUES ('s', 'x', -0.1)",
        "INSERT INTO long_term_memories (content, memory_type) VALUES ('x', 'rumour')",
        "INSERT INTO long_term_memories (content, memory_type, confidence) VALUES ('x', 'fact', 2)",
        "INSERT INTO long_term_memories (content, memory_type, access_count) VALUES ('x', 'fact', -3)",
        "INSERT INTO subagent_messages (parent_msg_id, session_id, agent_name, role, content) "
        "VALUES (1, 's', 'coder', 'user', 'x')",
    ],
)
def test_it_rejects_values_the_design_forbids(sql, statement):
    sql("INSERT INTO main_messages (id, session_id, role, content) VALUES (1, 's', 'user', 'x')")
    # PostgreSQL refuses malformed JSON as a type error, SQLite by a CHECK constraint.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        sql(statement)


@pytest.mark.django_db(transaction=True)
def test_it_rejects_a_subagent_message_without_its_parent(sql):
    # Django declares foreign keys DEFERRABLE INITIALLY DEFERRED: the check runs at commit.
    with pytest.raises(IntegrityError):
        sql(
            "INSERT INTO subagent_messages (parent_msg_id, session_id, agent_name, role, content) "
            "VALUES (999, 's', 'coder', 'assistant', 'x')"
        )
    assert not SubagentMessage.objects.exists()


def test_it_rejects_an_invalid_role_through_the_orm():
    with pytest.raises(IntegrityError), transaction.atomic():
        MainMessage.objects.create(session_id="s", role="robot", content="x")
    assert not MainMessage.objects.exists()


def test_it_cascades_a_main_message_delete_to_its_subagent_transcript(sql):
    parent = MainMessage.objects.create(session_id="s", role="tool", content="result")
    other = MainMessage.objects.create(session_id="s", role="tool", content="other result")
    for role in ("system", "assistant"):
        SubagentMessage.objects.create(
            parent_msg=parent, session_id="s", agent_name="coder", role=role, content="step"
        )
    SubagentMessage.objects.create(
        parent_msg=other, session_id="s", agent_name="coder", role="assistant", content="kept"
    )

    # Plain SQL, so the database's ON DELETE CASCADE does the work, not Django's collector.
    sql("DELETE FROM main_messages WHERE id = %s", [parent.pk])

    assert list(SubagentMessage.objects.values_list("content", flat=True)) == ["kept"]


def test_it_cascades_through_the_orm_too():
    parent = MainMessage.objects.create(session_id="s", role="tool", content="result")
    SubagentMessage.objects.create(
        parent_msg=parent, session_id="s", agent_name="coder", role="assistant", content="x"
    )
    parent.delete()
    assert not SubagentMessage.objects.exists()


@pytest.mark.sqlite_only
def test_it_keeps_the_designs_indexes(sql):
    names = {name for (name,) in sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {
        "idx_main_session_time",
        "idx_main_role",
        "idx_subagent_parent",
        "idx_stm_session",
        "idx_ltm_type",
    } <= names


@pytest.mark.sqlite_only
def test_it_configures_each_connection_for_concurrent_writers(sql):
    assert sql("PRAGMA journal_mode") == [("wal",)]
    assert sql("PRAGMA synchronous") == [(1,)]  # NORMAL
    assert sql("PRAGMA foreign_keys") == [(1,)]
    assert sql("PRAGMA busy_timeout") == [(10_000,)]
    assert connection.transaction_mode == "IMMEDIATE"


@pytest.mark.sqlite_only
def test_it_reports_the_sqlite_variable_limit_django_relies_on():
    # Django asks the driver for this limit when it splits bulk inserts.
    assert connection.features.max_query_params >= 999
    MainMessage.objects.bulk_create(
        MainMessage(session_id="s", role="user", content=f"m{i}") for i in range(500)
    )
    assert MainMessage.objects.count() == 500


FTS_TRIGGERS = {
    f"{table.name}_sync_{event}"
    for table in index.LEXICAL_TABLES
    for event in ("insert", "delete", "update")
}


def _triggers(run) -> set[str]:
    return {name for (name,) in run("SELECT name FROM sqlite_master WHERE type = 'trigger'")}


@pytest.mark.sqlite_only
def test_every_fts_table_keeps_its_triggers_after_all_migrations(sql):
    # Django rebuilds a table to alter it, dropping its triggers; a migration that forgets to
    # recreate them would silently stop indexing.
    assert _triggers(sql) >= FTS_TRIGGERS


@pytest.mark.slow
def test_migrations_reverse_and_reapply_with_the_triggers_in_place(tmp_path):
    manage(tmp_path, "migrate", "--no-input")
    manage(tmp_path, "migrate", "memory", "0004", "--no-input")
    manage(tmp_path, "migrate", "--no-input")

    db = Driver.connect(str(tmp_path / "data" / "orca.db"))
    assert _triggers(lambda q: db.execute(q).fetchall()) >= FTS_TRIGGERS
