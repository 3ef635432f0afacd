"""Migrations hold frozen SQL; the live FTS schema is what memory/index.py queries (issue 16).

The migrations no longer build their SQL from index.py, so nothing ties the two together but
these tests: the next change of an FTS table or trigger in index.py must come with a migration.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.db.migrations.executor import MigrationExecutor

from memory import index, index_sqlite, index_text
from memory.models import LongTermMemory, MainMessage, ShortTermMemory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_only]

BEFORE_REBUILD = "0010_dashboard_groups"
REBUILD = "0011_rebuild_lexical_index"
SCHEMA = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' OR sql LIKE 'CREATE VIRTUAL%'"


def _expected_schema() -> dict[str, str]:
    """Each FTS5 and vec0 table and each trigger, as index.py and index_text would create it."""
    expected = {}
    for table in index.LEXICAL_TABLES:
        names = [table.name, *(f"{table.name}_sync_{e}" for e in ("insert", "delete", "update"))]
        statements = [forward for forward, _ in index_sqlite.lexical_table_sql(table)]
        expected.update(zip(names, statements, strict=True))
    for table in index.VECTOR_TABLES:
        # SQLite stores a CREATE statement without its IF NOT EXISTS.
        sql = index_sqlite.vector_table_sql(table, settings.ORCA.embedding_dim)
        expected[table.name] = sql.replace(" IF NOT EXISTS", "", 1)
    # The text change log's triggers (the log itself is a plain table).
    for forward, _ in index_text.change_log_sql()[1:]:
        expected[forward.split('"')[1]] = forward
    return expected


def _before_the_log(schema: dict[str, str]) -> dict[str, str]:
    """The schema without the text change log's triggers, which come after the rebuild (0027)."""
    return {name: sql for name, sql in schema.items() if not name.startswith(index_text.CHANGES)}


def test_the_migrated_fts_and_vector_schema_is_what_the_index_code_expects(sql):
    # Equality, not inclusion: a trigger left from an older schema fails too.
    assert connection.vector_extension.enabled
    assert dict(sql(SCHEMA)) == _expected_schema()


def _migrate(target: str) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("memory", target)])


@pytest.fixture(autouse=True)
def _back_to_the_latest_migration():
    """A test that migrates back leaves the database as the code expects it for the next:
    later migrations change tables (0016 adds a history column)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _fts_rows(run) -> dict[str, list[tuple]]:
    return {
        table.name: run(f'SELECT rowid, * FROM "{table.name}" ORDER BY rowid')
        for table in index.LEXICAL_TABLES
    }


def _found(query: str) -> list[int]:
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=query, k=10)
    return [hit.id for hit in hits]


def _session() -> list[MainMessage]:
    """A question, its answer (which shares no word with it) and a Chinese message, a minute
    apart, and a message of another session."""
    start = datetime(2025, 5, 2, 9, 0, tzinfo=UTC)
    turns = [
        ("user", "Which instrument did Melanie take up in spring?"),
        ("assistant", "She started lessons on the cello."),
        ("user", "我的偏好是喝茶，不喝咖啡。"),
    ]
    messages = [
        MainMessage.objects.create(
            agent_id="a1",
            session_id="s1",
            role=role,
            content=content,
            timestamp=start + timedelta(minutes=i),
        )
        for i, (role, content) in enumerate(turns)
    ]
    MainMessage.objects.create(agent_id="a1", session_id="s2", role="user", content="unrelated")
    return messages


@pytest.mark.django_db(transaction=True)
def test_the_rebuild_leaves_a_current_database_as_it_was(sql):
    question, answer, tea = _session()
    ShortTermMemory.objects.create(agent_id="a1", session_id="s1", content="用户问了乐器")
    LongTermMemory.objects.create(agent_id="a1", content="Melanie plays cello", memory_type="fact")
    schema, rows = _before_the_log(dict(sql(SCHEMA))), _fts_rows(sql)
    messages = sql("SELECT * FROM main_messages ORDER BY id")
    assert len(rows["fts_main_messages"]) == 4

    _migrate(BEFORE_REBUILD)
    _migrate(REBUILD)

    assert dict(sql(SCHEMA)) == schema  # the log's triggers come back with 0027
    assert _fts_rows(sql) == rows
    assert sql("SELECT * FROM main_messages ORDER BY id") == messages
    assert _found("instrument") == [question.pk, answer.pk, tea.pk]


def _first_schema(name: str, source: str, scopes: tuple[str, ...]) -> list[str]:
    """The FTS table and triggers as the first storage commit (49d19d2) created them."""
    columns = ", ".join(["body", "cjk", *scopes])
    values = "new.id, orca_fts_words(new.content), orca_cjk_terms(new.content)" + "".join(
        f", 's' || lower(hex(new.\"{s}\"))" for s in scopes
    )
    insert = f'INSERT INTO "{name}" (rowid, {columns}) VALUES ({values});'
    delete = f'DELETE FROM "{name}" WHERE rowid = old.id;'
    watched = ", ".join(f'"{c}"' for c in ("content", *scopes))
    return [
        f"CREATE VIRTUAL TABLE \"{name}\" USING fts5({columns}, tokenize='unicode61 remove_diacritics 2')",
        f'CREATE TRIGGER "{name}_sync_insert" AFTER INSERT ON "{source}" BEGIN {insert} END',
        f'CREATE TRIGGER "{name}_sync_delete" AFTER DELETE ON "{source}" BEGIN {delete} END',
        f'CREATE TRIGGER "{name}_sync_update" AFTER UPDATE OF {watched} ON "{source}" '
        f"BEGIN {delete} {insert} END",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_rebuild_brings_a_database_of_the_first_fts_schema_to_todays(sql):
    _migrate(BEFORE_REBUILD)
    for table in index.LEXICAL_TABLES:
        for event in ("insert", "delete", "update"):
            sql(f'DROP TRIGGER "{table.name}_sync_{event}"')
        sql(f'DROP TABLE "{table.name}"')
        for statement in _first_schema(table.name, table.source, table.scopes):
            sql(statement)
    question, answer, tea = _session()
    # In SQL: the model's columns of today are not all in that schema.
    sql(
        "INSERT INTO long_term_memories (agent_id, content, memory_type) "
        "VALUES ('a1', 'Melanie plays cello', 'fact')"
    )
    memory_id = LongTermMemory.objects.values_list("pk", flat=True).get()
    # What users of such a database saw: today's queries name a column it does not have.
    with pytest.raises(OperationalError, match="ctx"):
        _found("instrument")

    _migrate(REBUILD)

    assert dict(sql(SCHEMA)) == _before_the_log(_expected_schema())
    # The answer is found by a word of the question before it (its `ctx`; the Chinese message
    # holds both turns before it), the Chinese message by a two-character word; the memory
    # kept its row and is indexed again, stemmed.
    assert _found("instrument") == [question.pk, answer.pk, tea.pk]
    assert _found("cello") == [answer.pk, tea.pk]
    assert _found("偏好") == [tea.pk]
    hits = index.lexical_search(index.MEMORY_TEXT, agent_id="a1", query="cellos", k=10)
    assert [hit.id for hit in hits] == [memory_id]
    # The triggers are today's too: a new message is indexed with its context.
    reply = MainMessage.objects.create(
        agent_id="a1", session_id="s1", role="assistant", content="Noted: tea, not coffee."
    )
    assert reply.pk in _found("偏好")
