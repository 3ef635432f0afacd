"""The derived vector index's approximate search: an HNSW graph beside a large matrix.

index_numpy answers KNN by scanning every vector of the agent: 15-30 ms at 110,500 x 1,024
(memory-bound), ten times that at ten times the messages. From `ANN_MIN_ROWS` live rows a
matrix also keeps a graph of its rows (usearch's HNSW, vectors as float16), which finds the
nearest in 1-6 ms with recall@10 0.999 on clustered vectors (docs/BENCHMARKS.md, "An
approximate index for one large agent"; faiss-cpu and hnswlib were measured against it).

The graph is a snapshot: built in a background thread from the matrix's rows as they were
(2-3 minutes of one core at 110,500 x 1,024; the matrix answers exactly meanwhile), its keys
the matrix's row numbers. A row written since (appended, or replaced in place) is not in it:
such rows are scored exactly beside the graph's candidates; a row deleted or replaced is taken
out of it. So every answer covers every live row, and every score is the matrix's exact cosine
(the graph only chooses candidates). Once the rows it misses or holds in vain pass
`STALE_FRACTION` of the matrix, a new graph is built the same way and replaces it.

Filters: the graph knows no metadata. Its candidates are filtered afterwards, so it answers
only while the filters leave at least `FILTERED_FRACTION` of the live rows (it is then asked
for twice as many as the share needs, and the exact scan answers if too few pass); a
narrower filter (one session, a time range) is answered by the exact scan of the rows it
leaves, which is cheap for being narrow.
"""

from __future__ import annotations

import math

import numpy as np
from usearch.index import Index

# Below this many live rows the exact scan is as fast (measured: ~1 ms at 10,000 x 1,024, the
# graph's query 0.5-1.5 ms) and a graph's build is not worth its memory.
ANN_MIN_ROWS = 20_000
# A new graph once the rows it misses or holds in vain pass this share of the matrix: each
# missed row costs an exact product per query.
STALE_FRACTION = 0.1
# The graph answers a filtered query only if the filters leave at least this share of rows.
FILTERED_FRACTION = 0.5
# HNSW's parameters: 16 links a node, and the search depth while building and querying (a
# query with larger k searches k deep). Building 128 deep took twice as long for the same
# recall@10 (1.0 at 20,000 x 1,024 clustered).
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64
# Candidates asked beyond k: the graph ranks by float16 vectors, which can swap near ties at
# the k-th place; the matrix scores them all exactly.
EXTRA_CANDIDATES = 16
# A graph is kept only if, for SELF_CHECKS of its own rows as queries, it finds this share of
# the 10 nearest other rows the exact scan finds. Vectors without near neighbours (uniformly
# random ones) defeat HNSW: recall@10 0.17 at 20,000 x 1,024, against 1.0 clustered.
SELF_CHECKS = 20
MIN_RECALL = 0.9
# Rows added this many at a time: the build reads them from the matrix without copying it.
_BATCH = 8192


def estimated_bytes(rows: int, dimension: int) -> int:
    """What a graph of that many rows holds: float16 vectors and about 800 bytes of links and
    arenas each (measured: 274 MiB at 110,500 x 1,024; a small graph holds more)."""
    return rows * (2 * dimension + 800)


class Graph:
    """An HNSW graph of the rows [0, covered) of a matrix that were alive when it was built.

    `indexed[i]`: row i's current vector is in the graph. Built by `build` (any thread, with
    no lock: it touches nothing shared), then kept by the matrix under the cache's lock.
    """

    def __init__(self, alive: np.ndarray, dimension: int) -> None:
        self.covered = len(alive)
        self.indexed = alive.copy()
        self._added = np.flatnonzero(alive)
        self.attached = False
        self.index = Index(
            ndim=dimension,
            metric="ip",  # the matrix holds unit vectors: the inner product is the cosine
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def build(self, vectors: np.ndarray) -> None:
        """Add the rows alive at the snapshot. `vectors` is the matrix's array as it was then:
        a row replaced meanwhile may be read either way, and is dropped at `attach`."""
        for start in range(0, len(self._added), _BATCH):
            rows = self._added[start : start + _BATCH]
            self.index.add(rows, vectors[rows], threads=1)

    def recall(self, vectors: np.ndarray, k: int = 10) -> float:
        """Recall@k against the exact scan of the rows it holds, for SELF_CHECKS of them as
        queries (each one's nearest others). Run after `build`, in its thread."""
        rng = np.random.default_rng(0)
        queries = rng.choice(self._added, min(SELF_CHECKS, len(self._added)), replace=False)
        held = np.full(self.covered, -np.inf, dtype=np.float32)
        found = 0
        for row in queries:
            scores = held.copy()
            scores[self._added] = (vectors[: self.covered] @ vectors[row])[self._added]
            exact = set(np.argpartition(-scores, k)[: k + 1].tolist()) - {int(row)}
            graph = self.index.search(vectors[row], k + 1, threads=1).keys.tolist()
            found += len(exact & (set(graph) - {int(row)}))
        return found / (k * len(queries))

    def attach(self) -> None:
        """Drop the rows changed while it was built; from now on changes apply at once."""
        self.attached = True
        self._drop(self._added[~self.indexed[self._added]])

    def forget(self, rows: np.ndarray) -> None:
        """These rows changed (replaced or deleted): the graph no longer answers for them."""
        rows = rows[rows < self.covered]
        rows = rows[self.indexed[rows]]
        self.indexed[rows] = False
        if self.attached:
            self._drop(rows)

    def _drop(self, rows: np.ndarray) -> None:
        if len(rows):
            self.index.remove(rows)

    @property
    def nbytes(self) -> int:
        return int(self.index.memory_usage) + self.indexed.nbytes + self._added.nbytes

    def stale(self, alive: np.ndarray) -> bool:
        """Whether the rows it misses (alive, not indexed) or holds in vain (indexed once,
        changed since) pass STALE_FRACTION of the matrix's `alive` rows."""
        missed = int(np.count_nonzero(alive[self.covered :]))
        missed += int(np.count_nonzero(alive[: self.covered] & ~self.indexed))
        vain = len(self._added) - int(np.count_nonzero(self.indexed))
        return missed + vain > STALE_FRACTION * max(1, int(np.count_nonzero(alive)))

    def candidates(
        self, query: np.ndarray, k: int, mask: np.ndarray, live: int
    ) -> np.ndarray | None:
        """The rows to score exactly for the k nearest of those in `mask` (the matrix's `live`
        rows that pass the filters): the graph's nearest that pass, and every row passing that
        the graph does not hold. None where the exact scan must answer: the filters leave too
        few rows, or too few of the graph's nearest pass them."""
        passing = int(np.count_nonzero(mask))
        share = passing / max(1, live)
        if share < FILTERED_FRACTION:
            return None
        outside = np.flatnonzero(mask[: self.covered] & ~self.indexed)
        tail = np.flatnonzero(mask[self.covered :]) + self.covered
        held = passing - len(outside) - len(tail)  # the graph's rows that pass
        # Filtered: twice the share's worth, as the passing rows are not spread evenly.
        count = EXTRA_CANDIDATES + (k if passing == live else math.ceil(2 * k / share))
        found = self.index.search(query, count, threads=1).keys.astype(np.int64)
        found = found[mask[found] & self.indexed[found]]
        if len(found) < min(k, held):
            return None
        return np.concatenate([found, outside, tail])
