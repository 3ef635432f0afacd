"""The vec0 layer: put, KNN with scope and filters, delete, and transactions."""

from __future__ import annotations

import math

import pytest
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from memory import index, index_postgres
from memory.index import MEMORY_VECTORS, MESSAGE_VECTORS, Filter

pytestmark = pytest.mark.django_db

DIM = settings.ORCA.embedding_dim


def unit(axis: int, wobble: float = 0.0) -> list[float]:
    """A vector pointing along one axis, tilted slightly towards the next one."""
    vector = [0.0] * DIM
    vector[axis] = 1.0
    vector[(axis + 1) % DIM] = wobble
    return vector


def put(
    row_id: int, vector: list[float], *, agent: str = "a1", session: str = "s1", **extra
) -> None:
    metadata = {"session_id": session, "role": "user", "msg_type": "normal", "created_at": 100}
    metadata.update(extra)
    index.vector_put(
        MESSAGE_VECTORS, row_id=row_id, agent_id=agent, embedding=vector, metadata=metadata
    )


def test_it_returns_the_written_vector_first():
    put(1, unit(0))
    put(2, unit(1))
    put(3, unit(0, wobble=0.5))

    hits = index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=3)

    assert [hit.id for hit in hits] == [1, 3, 2]
    assert math.isclose(hits[0].score, 1.0, abs_tol=1e-6)
    assert math.isclose(hits[2].score, 0.0, abs_tol=1e-6)  # orthogonal: cosine similarity 0


def test_it_never_returns_another_agents_vectors():
    put(1, unit(0), agent="a1")
    put(2, unit(0), agent="a2")

    assert [
        hit.id for hit in index.knn(MESSAGE_VECTORS, agent_id="a2", embedding=unit(0), k=5)
    ] == [2]
    assert index.knn(MESSAGE_VECTORS, agent_id="nobody", embedding=unit(0), k=5) == []


def test_it_scores_the_rows_asked_for_as_knn_scores_them():
    put(1, unit(0))
    put(2, unit(0, wobble=0.5))
    put(3, unit(1))
    put(4, unit(0), agent="a2")  # another agent's row is never scored
    nearest = {
        hit.id: hit.score
        for hit in index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=3)
    }

    scored = index.similarities(
        MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), row_ids=[2, 3, 4, 99]
    )

    assert sorted(hit.id for hit in scored) == [2, 3]
    for hit in scored:
        assert math.isclose(hit.score, nearest[hit.id], abs_tol=1e-6)
    assert math.isclose(dict(scored)[2], 1 / math.sqrt(1.25), abs_tol=1e-6)
    assert index.similarities(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), row_ids=[]) == []


def test_it_scores_more_rows_than_one_statement_looks_up(monkeypatch):
    # SQLite joins the point lookups into statements of SIMILARITY_LOOKUPS; PostgreSQL takes
    # them in one.
    monkeypatch.setattr("memory.index_sqlite.SIMILARITY_LOOKUPS", 2)
    for row_id in range(1, 6):
        put(row_id, unit(0, wobble=row_id / 10))
    put(6, unit(0), agent="a2")

    scored = index.similarities(
        MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), row_ids=[5, 1, 6, 3, 99, 2, 4]
    )

    assert sorted(hit.id for hit in scored) == [1, 2, 3, 4, 5]
    for hit in scored:
        assert math.isclose(hit.score, 1 / math.sqrt(1 + (hit.id / 10) ** 2), abs_tol=1e-6)


def test_it_filters_on_metadata_inside_the_scan():
    put(1, unit(0), session="s1", created_at=100)
    put(2, unit(0, 0.1), session="s2", created_at=200)
    put(3, unit(0, 0.2), session="s2", created_at=300, role="assistant")

    def ids(*filters: Filter) -> list[int]:
        hits = index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5, filters=filters)
        return [hit.id for hit in hits]

    assert ids(Filter("session_id", "=", "s2")) == [2, 3]
    assert ids(Filter("created_at", ">=", 200), Filter("created_at", "<", 300)) == [2]
    assert ids(Filter("role", "=", "assistant")) == [3]


def test_it_refuses_filters_on_unknown_columns_or_operators():
    with pytest.raises(ValueError):
        index.knn(
            MESSAGE_VECTORS,
            agent_id="a1",
            embedding=unit(0),
            k=1,
            filters=[Filter("content; DROP TABLE main_messages", "=", "x")],
        )
    with pytest.raises(ValueError):
        index.knn(
            MESSAGE_VECTORS,
            agent_id="a1",
            embedding=unit(0),
            k=1,
            filters=[Filter("session_id", "LIKE", "%")],
        )


def test_it_replaces_a_vector_in_place():
    put(1, unit(0))
    put(1, unit(5), agent="a1")

    hits = index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(5), k=5)
    assert [hit.id for hit in hits] == [1]
    assert math.isclose(hits[0].score, 1.0, abs_tol=1e-6)


def test_it_deletes_vectors():
    put(1, unit(0))
    put(2, unit(1))
    index.vector_delete(MESSAGE_VECTORS, [1])
    assert [
        hit.id for hit in index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5)
    ] == [2]


def test_it_refuses_vectors_that_are_not_finite_or_the_wrong_size():
    with pytest.raises(ValueError):
        put(1, [math.nan] * DIM)
    with pytest.raises(DatabaseError), transaction.atomic():
        put(1, [0.5] * (DIM - 1))
    assert index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5) == []


def test_a_rolled_back_savepoint_leaves_no_vector():
    put(1, unit(0))
    with pytest.raises(RuntimeError), transaction.atomic():
        put(2, unit(0, 0.1))
        raise RuntimeError("the embedding batch failed after the insert")
    assert [
        hit.id for hit in index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5)
    ] == [1]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_leaves_no_vector():
    with pytest.raises(RuntimeError), transaction.atomic():
        put(7, unit(0))
        raise RuntimeError("crash before commit")
    assert index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5) == []
    put(8, unit(0))
    assert [
        hit.id for hit in index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=5)
    ] == [8]


def test_it_creates_every_vector_table_with_the_configured_dimension(sql):
    for table in index.VECTOR_TABLES:
        if connection.vendor == "sqlite":
            (ddl,) = sql("SELECT sql FROM sqlite_master WHERE name = %s", [table.name])[0]
            assert f"FLOAT[{DIM}]" in ddl.upper()
            assert "agent_id TEXT PARTITION KEY" in ddl
        else:
            assert _postgres_embedding_column(sql, table.name) == (f"vector({DIM})", "m")
    assert index.vector_index_status().enabled


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's column storage")
def test_postgres_keeps_vectors_in_their_rows_when_it_makes_the_tables_anew(sql):
    # Storage MAIN, not pgvector's EXTERNAL (TOAST): docs/BENCHMARKS.md, PostgreSQL.
    index.drop_vector_tables()
    index.create_vector_tables(dimension=DIM)
    for table in index.VECTOR_TABLES:
        assert _postgres_embedding_column(sql, table.name) == (f"vector({DIM})", "m")


def _postgres_embedding_column(sql, table: str) -> tuple[str, str]:
    """The embedding column's type and storage ('m': MAIN, in the row)."""
    return sql(
        "SELECT format_type(atttypid, atttypmod), attstorage FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attname = 'embedding'",
        [table],
    )[0]


# --- PostgreSQL: an HNSW index of its own for a large agent ----------------------------------


def _agent_indexes(sql, table=MESSAGE_VECTORS) -> dict[str, str]:
    """A vector table's partial indexes: name -> predicate."""
    rows = sql(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname LIKE %s",
        [table.name, index_postgres._agent_index_prefix(table).replace("_", "\\_") + "%"],
    )
    return {name: definition.split(" WHERE ", 1)[1] for name, definition in rows}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's HNSW indexes")
def test_postgres_searches_the_graph_for_at_least_the_k_asked():
    put(1, unit(0))

    def searched_with(k: int) -> int:
        index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=unit(0), k=k)
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.ef_search")
            return int(cursor.fetchone()[0])

    # With fewer candidates than k, pgvector's iterative scan searches the graph again.
    assert searched_with(index_postgres.EF_SEARCH + 57) == index_postgres.EF_SEARCH + 57
    assert searched_with(3) == index_postgres.EF_SEARCH  # and never less than EF_SEARCH
    assert searched_with(index.KNN_MAX_K) == index_postgres.EF_SEARCH_MAX  # pgvector's largest


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's HNSW indexes")
@pytest.mark.django_db(transaction=True)
def test_postgres_builds_an_index_for_a_large_agent_and_drops_it_once_small(sql, monkeypatch):
    monkeypatch.setattr(index_postgres, "AGENT_INDEX_ROWS", 4)
    index_postgres.forget_agent_index_checks()
    for row_id in range(1, 5):
        put(row_id, unit(row_id, wobble=0.1), agent="big")
    assert index.maintain_agent_indexes() == []  # it holds every vector: the shared graph's
    for row_id in range(5, 10):
        put(row_id, unit(0), agent=f"small-{row_id}")
    before = index.knn(MESSAGE_VECTORS, agent_id="big", embedding=unit(2), k=3)

    index_postgres.forget_agent_index_checks()
    built = index.maintain_agent_indexes()

    name = index_postgres.agent_index_name("big")
    assert built == [name]
    assert _agent_indexes(sql) == {name: "(agent_id = 'big'::text)"}
    assert index.knn(MESSAGE_VECTORS, agent_id="big", embedding=unit(2), k=3) == before
    # Of the two HNSW indexes the planner takes the agent's (sorts are off: on 5 rows a sort
    # would win, as it does for a small agent).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        cursor.execute(
            "EXPLAIN SELECT msg_id FROM vec_main_messages WHERE agent_id = 'big' "
            "ORDER BY embedding <=> %s::vector LIMIT 3",
            [str(unit(2))],
        )
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert name in plan, plan

    assert index.maintain_agent_indexes() == []  # checked a moment ago: not again yet
    index.vector_delete(MESSAGE_VECTORS, [1, 2, 3])  # 1 of 4 left: under half
    index_postgres.forget_agent_index_checks()
    assert index.maintain_agent_indexes() == [name]
    assert _agent_indexes(sql) == {}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's HNSW indexes")
@pytest.mark.django_db(transaction=True)
def test_postgres_builds_an_index_for_an_agent_with_many_memories(sql, monkeypatch):
    monkeypatch.setattr(index_postgres, "AGENT_INDEX_ROWS", 4)
    index_postgres.forget_agent_index_checks()
    for row_id in range(1, 10):
        index.vector_put(
            MEMORY_VECTORS,
            row_id=row_id,
            agent_id="big" if row_id < 5 else f"small-{row_id}",
            embedding=unit(row_id, wobble=0.1),
            metadata={"memory_type": "fact"},
        )
    name = index_postgres.agent_index_name("big", MEMORY_VECTORS)
    assert index.maintain_agent_indexes() == [name]  # no message vectors: none of theirs
    assert _agent_indexes(sql, MEMORY_VECTORS) == {name: "(agent_id = 'big'::text)"}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's HNSW indexes")
@pytest.mark.django_db(transaction=True)
def test_postgres_keeps_an_index_built_by_hand_for_its_agent(sql, monkeypatch):
    monkeypatch.setattr(index_postgres, "AGENT_INDEX_ROWS", 4)
    for row_id in range(1, 10):
        put(row_id, unit(row_id, wobble=0.1), agent="big" if row_id < 5 else f"small-{row_id}")
    with connection.cursor() as cursor:  # docs/DEPLOYMENT.md, "A large agent"
        cursor.execute(
            'CREATE INDEX "vec_main_messages_hnsw_big" ON vec_main_messages '
            "USING hnsw (embedding vector_cosine_ops) WHERE agent_id = 'big'"
        )
        cursor.execute("""COMMENT ON INDEX "vec_main_messages_hnsw_big" IS 'big'""")
    index_postgres.forget_agent_index_checks()
    assert index.maintain_agent_indexes() == []
    assert list(_agent_indexes(sql)) == ["vec_main_messages_hnsw_big"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's HNSW indexes")
def test_postgres_builds_no_index_inside_a_transaction(monkeypatch):
    monkeypatch.setattr(index_postgres, "AGENT_INDEX_ROWS", 1)
    index_postgres.forget_agent_index_checks()
    put(1, unit(0), agent="big")
    assert index.maintain_agent_indexes() == []  # CREATE INDEX CONCURRENTLY cannot run here
