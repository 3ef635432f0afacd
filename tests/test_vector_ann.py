"""The derived vector index's approximate graph (memory.index_ann): above its size threshold it
chooses KNN's candidates, with recall@10 >= 0.98 against exact, kept current by the change log,
counted in the memory bound. The threshold is lowered here so that the graphs stay small."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings

from memory import index, index_ann, index_numpy
from memory.index import MESSAGE_VECTORS, Filter, VectorRow
from tests.test_vector_cache import DIM, assert_same, derived, put, vec0

pytestmark = [pytest.mark.sqlite_only, pytest.mark.django_db(transaction=True)]

THRESHOLD = 300


def clustered(count: int, seed: int) -> np.ndarray:
    """Unit vectors around 100 centres, each at its own distance from its centre: neighbours
    at a spread of similarities, as real embeddings have (vectors all about equally near
    their centre are near ties, which no approximate index orders reliably)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).standard_normal((100, DIM)) / np.sqrt(DIM)
    noise = rng.standard_normal((count, DIM)) / np.sqrt(DIM) * rng.uniform(0.2, 1.5, (count, 1))
    vectors = centres[rng.integers(0, 100, count)] + noise
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch):
    monkeypatch.setattr(index_ann, "ANN_MIN_ROWS", THRESHOLD)
    index_numpy.clear()
    yield
    index_numpy.settle()
    index_numpy.clear()


@pytest.fixture
def graph_answers(monkeypatch) -> list[bool]:
    """Each KNN the graph was asked: whether it answered (False: the exact scan did)."""
    answers: list[bool] = []
    candidates = index_ann.Graph.candidates

    def counted(self, *args):
        rows = candidates(self, *args)
        answers.append(rows is not None)
        return rows

    monkeypatch.setattr(index_ann.Graph, "candidates", counted)
    return answers


def put_many(vectors: np.ndarray, first: int = 1, *, agent: str = "a1") -> None:
    """One transaction, as the embedding worker writes a batch."""
    index.vectors_put(
        MESSAGE_VECTORS,
        [
            VectorRow(
                row_id,
                agent,
                {
                    "session_id": f"s{row_id % 7}",
                    "role": "assistant" if row_id % 2 else "user",
                    "msg_type": "normal",
                    "created_at": row_id,
                },
                vector.tolist(),
            )
            for row_id, vector in enumerate(vectors, start=first)
        ],
    )


def built(agent: str = "a1", query=None) -> None:
    """A KNN starts the agent's graph; wait for it."""
    derived(agent, clustered(1, seed=99)[0] if query is None else query)
    index_numpy.settle()


def recall(queries: np.ndarray, k: int = 10, filters=()) -> float:
    found = [
        len(
            {h.id for h in derived("a1", q, k, filters)} & {h.id for h in vec0("a1", q, k, filters)}
        )
        for q in queries
    ]
    return sum(found) / (k * len(queries))


def graph_of(agent: str = "a1") -> index_ann.Graph | None:
    matrices = index_numpy._CACHE.matrices
    return next(m.graph for key, m in matrices.items() if key[1:] == (MESSAGE_VECTORS.name, agent))


def test_above_the_threshold_the_graph_answers_with_recall_against_exact(graph_answers):
    vectors = clustered(1200, seed=1)
    put_many(vectors)
    built()
    assert index_numpy.report().graphs == 1

    queries = clustered(30, seed=2)
    assert recall(queries, k=10) >= 0.98
    assert graph_answers and all(graph_answers)
    # The graph only chooses: every score is the exact cosine.
    for query in queries[:5]:
        for hit in derived("a1", query):
            exact = index_numpy.unit(vectors[hit.id - 1]) @ index_numpy.unit(query)
            assert hit.score == pytest.approx(float(exact), abs=1e-5)


def test_the_threshold_boundary():
    vectors = clustered(THRESHOLD, seed=3)
    put_many(vectors[:-1])
    built()
    assert index_numpy.report().graphs == 0  # one row short: exact only

    put_many(vectors[-1:], first=THRESHOLD)
    built()
    assert index_numpy.report().graphs == 1


def test_puts_replacements_and_deletes_after_the_build_are_answered(graph_answers):
    vectors = clustered(600, seed=4)
    put_many(vectors[:500])
    built()
    graph = graph_of()

    put_many(vectors[500:510], first=501)  # not in the graph: scored beside it
    put(7, vectors[520], session="moved")  # replaced in place: out of the graph
    index.vector_delete(MESSAGE_VECTORS, [1, 2, 3])

    assert derived("a1", vectors[505], k=1)[0].id == 506
    assert derived("a1", vectors[520], k=1)[0].id == 7
    assert 1 not in {hit.id for hit in derived("a1", vectors[0])}
    assert_same(derived("a1", vectors[0], k=1), vec0("a1", vectors[0], k=1))
    assert recall(clustered(20, seed=5)) >= 0.98
    assert graph_of() is graph and all(graph_answers)  # the same graph answered throughout


def test_a_graph_that_misses_too_many_rows_is_built_again():
    vectors = clustered(700, seed=6)
    put_many(vectors[:500])
    built()
    first = graph_of()

    put_many(vectors[500:], first=501)  # 200 rows the graph misses: over STALE_FRACTION
    built()

    assert graph_of() is not first
    assert graph_of().covered == 700
    assert recall(clustered(20, seed=7)) >= 0.98


def test_a_reset_drops_the_graph_and_a_new_one_is_built():
    vectors = clustered(400, seed=8)
    put_many(vectors)
    built()
    assert index_numpy.report().graphs == 1

    index.drop_vector_tables()
    index.create_vector_tables(dimension=settings.ORCA.embedding_dim)

    assert derived("a1", vectors[0]) == []
    assert index_numpy.report().graphs == 0
    put_many(vectors[:350])
    built()
    assert index_numpy.report().graphs == 1
    assert derived("a1", vectors[10], k=1)[0].id == 11


def test_a_narrow_filter_is_answered_exactly_a_wide_one_by_the_graph(graph_answers):
    put_many(clustered(1200, seed=9))
    built()
    queries = clustered(20, seed=10)

    session = (Filter("session_id", "=", "s3"),)  # a seventh of the rows
    for query in queries:
        assert_same(derived("a1", query, 10, session), vec0("a1", query, 10, session))
    assert not any(graph_answers)

    graph_answers.clear()
    role = (Filter("role", "=", "user"),)  # half of them
    assert recall(queries, 10, role) >= 0.98
    assert all(graph_answers)


def test_the_graph_counts_in_the_memory_bound(monkeypatch):
    put_many(clustered(400, seed=11))
    built()
    with_graph = index_numpy.report()
    graph = graph_of()
    assert with_graph.graphs == 1
    assert with_graph.bytes >= graph.nbytes + 400 * settings.ORCA.embedding_dim * 4

    # A bound the matrix fits but not its graph's estimate: none is built.
    matrix_bytes = with_graph.bytes - graph.nbytes
    estimate = index_ann.estimated_bytes(400, settings.ORCA.embedding_dim)
    for limit, refused in (
        (matrix_bytes + estimate // 2, False),
        # One the estimate fits but not the graph as built (a small usearch graph holds
        # more than its rows: arenas): built, then dropped for good.
        (matrix_bytes + estimate * 2, True),
    ):
        assert limit < with_graph.bytes
        index_numpy.clear()
        monkeypatch.setattr(index_numpy, "_limit", lambda limit=limit: limit)
        built()
        report = index_numpy.report()
        assert report.matrices == 1 and report.graphs == 0
        assert report.bytes <= limit
        (matrix,) = index_numpy._CACHE.matrices.values()
        assert matrix.graph_refused is refused


def test_vectors_without_near_neighbours_get_no_graph(caplog):
    """Uniformly random vectors defeat HNSW (every row about as far as every other): the graph's
    check on its own rows finds too few of the nearest, and the exact scan goes on answering."""
    rng = np.random.default_rng(12)
    uniform = rng.standard_normal((3000, DIM))
    put_many((uniform / np.linalg.norm(uniform, axis=1, keepdims=True)).astype(np.float32))

    built()

    report = index_numpy.report()
    assert report.matrices == 1 and report.graphs == 0
    (matrix,) = index_numpy._CACHE.matrices.values()
    assert matrix.graph_refused
    assert "too few near neighbours" in caplog.text
    query = clustered(1, seed=13)[0]
    assert_same(derived("a1", query), vec0("a1", query))
