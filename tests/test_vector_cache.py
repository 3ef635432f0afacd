"""SQLite's derived vector index (memory.index_numpy): the same answers as vec0, kept current
by the change log across processes, bounded in memory. Outside a transaction `index.knn` asks
the derived index; inside one it asks vec0, which is what these tests compare it with."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction

from memory import index, index_numpy
from memory.index import MEMORY_VECTORS, MESSAGE_VECTORS, SUMMARY_VECTORS, VECTOR_TABLES, Filter
from tests.helpers import on_this_database

pytestmark = [pytest.mark.sqlite_only, pytest.mark.django_db(transaction=True)]

DIM = settings.ORCA.embedding_dim


@pytest.fixture(autouse=True)
def _fresh_cache():
    index_numpy.clear()
    yield
    index_numpy.clear()


def clustered(count: int, seed: int) -> np.ndarray:
    """Unit vectors around 20 centres: near neighbours that differ only a little, as real
    embeddings do (random vectors would all be about equally far apart)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, DIM))
    vectors = centres[rng.integers(0, 20, count)] + 0.3 * rng.standard_normal((count, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def put(row_id: int, vector, *, agent: str = "a1", session: str = "s1", **extra) -> None:
    metadata = {"session_id": session, "role": "user", "msg_type": "normal", "created_at": row_id}
    metadata.update(extra)
    index.vector_put(
        MESSAGE_VECTORS, row_id=row_id, agent_id=agent, embedding=list(vector), metadata=metadata
    )


def derived(agent: str, query, k: int = 10, filters=()) -> list[index.Hit]:
    assert index_numpy.enabled("default")
    return index.knn(MESSAGE_VECTORS, agent_id=agent, embedding=list(query), k=k, filters=filters)


def vec0(agent: str, query, k: int = 10, filters=()) -> list[index.Hit]:
    with transaction.atomic():  # inside a transaction index.knn reads vec0
        assert not index_numpy.enabled("default")
        return index.knn(
            MESSAGE_VECTORS, agent_id=agent, embedding=list(query), k=k, filters=filters
        )


def assert_same(derived_hits: list[index.Hit], vec0_hits: list[index.Hit]) -> None:
    assert [hit.id for hit in derived_hits] == [hit.id for hit in vec0_hits]
    assert np.allclose(
        [hit.score for hit in derived_hits], [hit.score for hit in vec0_hits], atol=1e-5
    )


def test_it_returns_what_vec0_returns_with_scope_and_filters():
    vectors = clustered(600, seed=1)
    for row_id, vector in enumerate(vectors, start=1):
        put(
            row_id,
            vector,
            agent=f"a{row_id % 3}",
            # vec0 keeps 12 bytes of a text inline, the rest apart: both kinds, in UTF-8.
            session=f"s{row_id % 7}" if row_id % 2 else f"会话-{row_id % 7}-一个很长的名字",
            role="assistant" if row_id % 2 else "user",
        )
    queries = clustered(20, seed=2)
    filter_sets = [
        (),
        (Filter("session_id", "=", "s3"),),
        (Filter("session_id", "=", "会话-4-一个很长的名字"),),
        (Filter("session_id", "!=", "s3"), Filter("role", "=", "assistant")),
        (Filter("created_at", ">=", 100), Filter("created_at", "<", 400)),
        (Filter("session_id", "=", "no such session"),),
    ]
    for query in queries:
        for agent in ("a0", "a1", "a2", "nobody"):
            for filters in filter_sets:
                assert_same(derived(agent, query, 10, filters), vec0(agent, query, 10, filters))
    assert index_numpy.report().matrices == 4  # "nobody" holds an empty one
    assert index_numpy.report().vectors == 600


def test_it_never_returns_another_agents_rows():
    put(1, clustered(1, seed=3)[0], agent="a1")
    put(2, clustered(1, seed=3)[0], agent="a2")

    assert [hit.id for hit in derived("a2", clustered(1, seed=3)[0])] == [2]


def test_it_gives_the_similarities_vec0_gives_of_the_agents_live_rows():
    vectors = clustered(40, seed=11)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector, agent="a1" if row_id <= 30 else "a2")
    derived("a1", vectors[0])  # builds the matrix
    index.vector_delete(MESSAGE_VECTORS, [3])
    asked = [5, 3, 35, 12, 99, 1]  # a deleted row, another agent's, one never written
    query = list(clustered(1, seed=12)[0])

    found = index.similarities(MESSAGE_VECTORS, agent_id="a1", embedding=query, row_ids=asked)
    with transaction.atomic():  # inside a transaction vec0 answers
        expected = index.similarities(
            MESSAGE_VECTORS, agent_id="a1", embedding=query, row_ids=asked
        )

    assert [hit.id for hit in found] == [5, 12, 1]
    assert_same(found, expected)
    answered_here = index_numpy.similarities(
        MESSAGE_VECTORS, agent_id="a1", embedding=query, row_ids=asked, using="default"
    )
    assert answered_here == found


def test_a_vector_written_after_the_matrix_was_built_is_found():
    vectors = clustered(50, seed=4)
    for row_id, vector in enumerate(vectors[:49], start=1):
        put(row_id, vector)
    derived("a1", vectors[0])  # builds the matrix

    put(50, vectors[49])

    assert derived("a1", vectors[49], k=1)[0].id == 50
    assert_same(derived("a1", vectors[49]), vec0("a1", vectors[49]))


def test_a_replaced_vector_is_answered_with_its_new_value():
    vectors = clustered(3, seed=5)
    put(1, vectors[0])
    put(2, vectors[1])
    derived("a1", vectors[0])

    put(1, vectors[2], session="s9")

    assert derived("a1", vectors[2], k=1, filters=[Filter("session_id", "=", "s9")])[0].id == 1
    assert_same(derived("a1", vectors[0]), vec0("a1", vectors[0]))


def test_a_deleted_vector_is_not_returned():
    vectors = clustered(10, seed=6)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector)
    derived("a1", vectors[0])

    index.vector_delete(MESSAGE_VECTORS, [1, 2])

    assert {1, 2}.isdisjoint(hit.id for hit in derived("a1", vectors[0]))
    assert_same(derived("a1", vectors[0]), vec0("a1", vectors[0]))


def test_a_rolled_back_write_never_reaches_the_matrix():
    vectors = clustered(2, seed=7)
    put(1, vectors[0])
    derived("a1", vectors[0])

    with pytest.raises(RuntimeError), transaction.atomic():
        put(2, vectors[1])
        # Inside the transaction vec0 answers, with the transaction's own write.
        assert [
            hit.id
            for hit in index.knn(MESSAGE_VECTORS, agent_id="a1", embedding=list(vectors[1]), k=1)
        ] == [2]
        raise RuntimeError("roll back")

    assert [hit.id for hit in derived("a1", vectors[1])] == [1]


def test_dropping_the_vector_tables_empties_every_matrix():
    vectors = clustered(5, seed=8)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector)
    assert len(derived("a1", vectors[0])) == 5

    index.drop_vector_tables()
    index.create_vector_tables(dimension=DIM)

    assert derived("a1", vectors[0]) == []
    put(9, vectors[1])
    assert [hit.id for hit in derived("a1", vectors[1])] == [9]


def test_a_matrix_behind_the_pruned_log_is_rebuilt(monkeypatch):
    monkeypatch.setattr(index_numpy, "RETAIN_CHANGES", 3)
    vectors = clustered(10, seed=9)
    put(1, vectors[0])
    derived("a1", vectors[0])

    for row_id, vector in enumerate(vectors[1:], start=2):
        put(row_id, vector)  # more writes than the log keeps

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {index_numpy.CHANGES}")
        assert cursor.fetchone()[0] <= 4
    assert_same(derived("a1", vectors[5]), vec0("a1", vectors[5]))
    assert len(derived("a1", vectors[5])) == 10


def test_it_keeps_within_its_memory_bound(monkeypatch):
    monkeypatch.setattr(settings, "ORCA", dataclasses.replace(settings.ORCA, vector_cache_mb=1))
    per_agent = (1024 * 1024) // (DIM * 4) * 2 // 3  # two thirds of the bound each
    vectors = clustered(per_agent, seed=10)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector, agent="a1")
        put(row_id + per_agent, vector, agent="a2")

    derived("a1", vectors[0])
    derived("a2", vectors[0])  # the least recently used (a1's) is dropped for it

    report = index_numpy.report()
    assert report.matrices == 1
    assert report.limit_bytes == 1024 * 1024
    assert report.bytes <= report.limit_bytes
    assert_same(derived("a1", vectors[3]), vec0("a1", vectors[3]))


def test_an_agent_over_the_bound_is_answered_by_vec0(monkeypatch):
    monkeypatch.setattr(settings, "ORCA", dataclasses.replace(settings.ORCA, vector_cache_mb=1))
    vectors = clustered((1024 * 1024) // (DIM * 4) + 10, seed=11)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector)

    hits = derived("a1", vectors[7])

    assert index_numpy.report().matrices == 0
    assert hits[0].id == 8
    assert_same(hits, vec0("a1", vectors[7]))


def test_summaries_and_memories_are_answered_too():
    vectors = clustered(4, seed=12)
    for row_id, vector in enumerate(vectors, start=1):
        index.vector_put(
            SUMMARY_VECTORS,
            row_id=row_id,
            agent_id="a1",
            embedding=list(vector),
            metadata={"session_id": f"s{row_id % 2}"},
        )
        index.vector_put(
            MEMORY_VECTORS,
            row_id=row_id,
            agent_id="a1",
            embedding=list(vector),
            metadata={"memory_type": "fact" if row_id < 3 else "preference"},
        )

    summaries = index.knn(
        SUMMARY_VECTORS,
        agent_id="a1",
        embedding=list(vectors[1]),
        k=5,
        filters=[Filter("session_id", "=", "s0")],
    )
    memories = index.knn(
        MEMORY_VECTORS,
        agent_id="a1",
        embedding=list(vectors[3]),
        k=5,
        filters=[Filter("memory_type", "=", "preference")],
    )

    assert [hit.id for hit in summaries][0] == 2 and {h.id for h in summaries} == {2, 4}
    assert [hit.id for hit in memories] == [4, 3]
    assert index_numpy.report().matrices == 2


def test_the_installed_sqlite_vec_writes_the_storage_layout_the_derived_index_reads():
    """Fails, never skips: with a sqlite-vec whose vec0 storage the derived index does not
    read, every answer stays right and every KNN scans vec0 instead (slower on large agents,
    docs/BENCHMARKS.md), which no other test would notice. After an upgrade, check the
    layout index_numpy reads against the new version's and add it to KNOWN_FORMATS."""
    extension = connection.vector_extension
    assert extension.enabled, extension.reason

    def execute(sql, params):
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    versions = {table.name: index_numpy.storage_version(table, execute) for table in VECTOR_TABLES}
    assert set(versions.values()) <= index_numpy.KNOWN_FORMATS, (
        f"sqlite-vec {extension.version} made {versions}; index_numpy reads "
        f"{sorted(index_numpy.KNOWN_FORMATS)}"
    )
    vectors = clustered(3, seed=16)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector)
    hits = derived("a1", vectors[1])
    assert index_numpy.report().matrices == 1  # the derived index answered, not vec0
    assert_same(hits, vec0("a1", vectors[1]))


def test_health_says_the_derived_index_answers_knn(client):
    knn = client.get("/api/v1/health").json()["vector_search"]["knn"]

    assert knn["path"] == "memory_index"
    assert "derived index" in knn["reason"]


def test_health_says_vec0_scans_a_table_of_an_unknown_layout(client):
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {SUMMARY_VECTORS.name}_info SET value = 'v9.9.9' WHERE key = 'CREATE_VERSION'"
        )

    knn = client.get("/api/v1/health").json()["vector_search"]["knn"]

    assert knn["path"] == "vec0_scan"
    assert f"{SUMMARY_VECTORS.name} (v9.9.9)" in knn["reason"]
    assert MESSAGE_VECTORS.name not in knn["reason"]


def test_health_says_vec0_scans_when_the_derived_index_is_off(client, monkeypatch):
    monkeypatch.setattr(settings, "ORCA", dataclasses.replace(settings.ORCA, vector_cache_mb=0))

    knn = client.get("/api/v1/health").json()["vector_search"]["knn"]

    assert knn == {"path": "vec0_scan", "reason": "the derived index is off (vector_cache_mb = 0)"}


def test_the_health_report_shows_the_memory_index(client):
    put(1, clustered(1, seed=13)[0])
    derived("a1", clustered(1, seed=13)[0])

    memory_index = client.get("/api/v1/health").json()["vector_search"]["memory_index"]

    assert memory_index["matrices"] == 1
    assert memory_index["vectors"] == 1
    assert memory_index["bytes"] >= DIM * 4
    assert memory_index["limit_bytes"] == settings.ORCA.vector_cache_mb * 1024 * 1024


@pytest.mark.slow
def test_two_processes_see_each_others_writes(tmp_path):
    """Another process writes and deletes vectors after this one built its matrix; this
    one's answers follow, and the other process's own matrix follows this one's writes."""
    vectors = clustered(6, seed=14)
    for row_id, vector in enumerate(vectors[:3], start=1):
        put(row_id, vector)
    assert len(derived("a1", vectors[0])) == 3
    np.save(tmp_path / "vectors.npy", vectors)
    script = textwrap.dedent(
        f"""
        import sys
        import django
        django.setup()
        import numpy as np
        from memory import index
        vectors = np.load({str(tmp_path / "vectors.npy")!r})
        def ids(query):
            hits = index.knn(
                index.MESSAGE_VECTORS, agent_id="a1", embedding=list(query), k=10
            )
            return sorted(hit.id for hit in hits)
        assert ids(vectors[0]) == [1, 2, 3], ids(vectors[0])
        for row_id in (4, 5):
            index.vector_put(
                index.MESSAGE_VECTORS, row_id=row_id, agent_id="a1",
                embedding=list(vectors[row_id - 1]),
                metadata={{"session_id": "s1", "role": "user", "msg_type": "normal",
                          "created_at": row_id}},
            )
        index.vector_delete(index.MESSAGE_VECTORS, [2])
        print("written", flush=True)
        sys.stdin.readline()  # the test process writes row 6 meanwhile
        print(ids(vectors[5]), flush=True)
        """
    )
    other = on_this_database(script, ORCA_EMBEDDING_DIM=str(DIM))
    try:
        assert other.stdout.readline().strip() == "written", other.stderr.read()

        assert sorted(hit.id for hit in derived("a1", vectors[0])) == [1, 3, 4, 5]
        put(6, vectors[5])
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.stdout.readline().strip() == "[1, 3, 4, 5, 6]", other.stderr.read()
    finally:
        other.kill()
        other.wait()


def test_a_table_of_an_unknown_vec0_layout_is_answered_by_vec0():
    vectors = clustered(5, seed=15)
    for row_id, vector in enumerate(vectors, start=1):
        put(row_id, vector)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {MESSAGE_VECTORS.name}_info SET value = 'v9.9.9' WHERE key = 'CREATE_VERSION'"
        )

    hits = derived("a1", vectors[2])

    assert index_numpy.report().matrices == 0
    assert_same(hits, vec0("a1", vectors[2]))


@pytest.mark.parametrize("table", VECTOR_TABLES, ids=lambda table: table.name)
def test_reading_the_storage_looks_each_chunk_up_by_its_key(table):
    """vec0's tables key their chunks by a column without a type: compared with an INTEGER
    column, SQLite would scan every such table once per chunk read (quadratic in the agent's
    size: 255 s at 1M vectors). Every table but the chunks table must be searched by key."""
    index.vector_put(
        table,
        row_id=1,
        agent_id="a1",
        embedding=[1.0] * DIM,
        metadata={
            column: 1 if kind == "integer" else "x" for column, kind in table.metadata.items()
        },
    )
    sql = index_numpy.chunks_sql(table, "c.partition00 = %s")
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", ["a1"])
        steps = [row[-1] for row in cursor.fetchall()]
    scans = [step for step in steps if step.startswith("SCAN") and step != "SCAN c"]
    assert not scans, steps
    assert len(steps) == 2 + len(table.metadata)
