"""Migrations hold frozen SQL; the live FTS schema is what memory/index.py queries (issue 16).

The migrations no longer build their SQL from index.py, so nothing ties the two together but
these tests: the next change of an FTS table or trigger in index.py must come with a migration.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from memory import index

pytestmark = pytest.mark.django_db

SCHEMA = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' OR sql LIKE 'CREATE VIRTUAL%'"


def _expected_schema() -> dict[str, str]:
    """Each FTS5 and vec0 table and each trigger, as index.py would create it."""
    expected = {}
    for table in index.LEXICAL_TABLES:
        names = [table.name, *(f"{table.name}_sync_{e}" for e in ("insert", "delete", "update"))]
        statements = [forward for forward, _ in index.lexical_table_sql(table)]
        expected.update(zip(names, statements, strict=True))
    for table in index.VECTOR_TABLES:
        # SQLite stores a CREATE statement without its IF NOT EXISTS.
        sql = index.vector_table_sql(table, settings.ORCA.embedding_dim)
        expected[table.name] = sql.replace(" IF NOT EXISTS", "", 1)
    return expected


def test_the_migrated_fts_and_vector_schema_is_what_the_index_code_expects(sql):
    # Equality, not inclusion: a trigger left from an older schema fails too.
    assert connection.vector_search.enabled
    assert dict(sql(SCHEMA)) == _expected_schema()
