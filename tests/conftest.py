from __future__ import annotations

import pytest
from django.db import connection


@pytest.fixture
def sql():
    """Run one statement on the test database as plain SQL and return its rows."""

    def run(statement: str, params: list[object] | tuple[object, ...] = ()) -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    return run


@pytest.fixture(autouse=True)
def _fresh_vector_tables_after_transactional_tests(request):
    """Django flushes model tables after a transactional test; vec0 tables need it too."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker and marker.kwargs.get("transaction"):
        from django.conf import settings

        from memory import index

        index.drop_vector_tables()
        index.create_vector_tables(dimension=settings.ORCA.embedding_dim)
