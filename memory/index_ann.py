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

Built once, for every process: the graph is keyed by row ids, one process builds it at a
time (`building`: a lock file beside it) and saves it (`Graph.save`: the graph, its keys,
the change log entry its vectors are as of, its search depth), each file written whole
before it is named. Another process, or the next start, maps that
file read only (`load`, `Graph.restored`) in place of a build: the rows the log says changed
since are not indexed (scored exactly, as rows written after a build are), and a few rows'
vectors are checked against the matrix first (`Graph.agrees`). A graph mapped from its file
cannot drop rows; they are only no longer indexed, and the staleness rule replaces it.

For an agent whose vectors are over the memory bound, index_numpy holds no matrix of vectors:
`build` makes its graph from vec0's storage a batch at a time (`tune` checks it the same
way), and the saved file, mapped, is the only copy of the vectors the process reads
(`Graph.vectors`).

Filters: the graph knows no metadata. Its candidates are filtered afterwards, so it answers
only while the filters leave at least `FILTERED_FRACTION` of the live rows (it is then asked
for twice as many as the share needs, and the exact scan answers if too few pass); a
narrower filter (one session, a time range) is answered by the exact scan of the rows it
leaves, which is cheap for being narrow.
"""

from __future__ import annotations

import fcntl
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from usearch.index import Index

from orca_memory.core.files import PRIVATE_FILE_MODE, private_dir

# Below this many live rows the exact scan is as fast (measured: ~1 ms at 10,000 x 1,024, the
# graph's query 0.5-1.5 ms) and a graph's build is not worth its memory.
ANN_MIN_ROWS = 20_000
# A new graph once the rows it misses or holds in vain pass this share of the matrix: each
# missed row costs an exact product per query.
STALE_FRACTION = 0.1
# The graph answers a filtered query only if the filters leave at least this share of rows.
FILTERED_FRACTION = 0.5
# HNSW's parameters: 16 links a node, and the search depth while building. Clusters of many
# near ties need a deep build: at 1,000,000 x 1,024 clustered, built 64 deep the graph found
# at most 0.878 of the exact 10 however deep the search (2,048); built 256 deep, 1.000 at 256
# deep, as fast, in the same memory, for 2.7 times the build (docs/BENCHMARKS.md, "One agent
# at 1M"). 32 links built 128 deep found 0.996 in 11% more memory. At 20,000 all find 1.0.
CONNECTIVITY = 16
EXPANSION_ADD = 256
# The search depths a graph may query with (a query with larger k searches k deep): the
# first whose recall@10 on its own rows reaches TARGET_RECALL (`tune`), of those that visit
# fewer links than the graph has rows. Where a cluster holds many near ties, a larger graph
# needs a deeper search: 200,000 x 1,024 in clusters of 1,000 found 0.92 at 64, 0.98 at 128.
EXPANSIONS = (64, 128, 256, 512)
TARGET_RECALL = 0.98
# Candidates asked beyond k: the graph ranks by float16 vectors, which can swap near ties at
# the k-th place; the matrix scores them all exactly.
EXTRA_CANDIDATES = 16
# A graph is kept only if, for SELF_CHECKS of its own rows as queries, it finds this share of
# the 10 nearest other rows the exact scan finds at its deepest search. Vectors without near
# neighbours (uniformly random ones) defeat HNSW: recall@10 0.17 at 20,000 x 1,024 built 64
# deep, against 1.0 clustered. Rows among many near ties are missed more, and mostly for one
# another (1,000,000 clustered rows, the 10 nearest of a row within 0.02 of each other, found
# 0.85 built 64 deep).
SELF_CHECKS = 20
MIN_RECALL = 0.8
# The rows a saved graph is checked on before another process takes it (`Graph.agrees`).
AGREEMENT_CHECKS = 8
# Rows added this many at a time: the build reads them from the matrix without copying it.
_BATCH = 8192


def estimated_bytes(rows: int, dimension: int) -> int:
    """What a graph of that many rows holds: float16 vectors and about 800 bytes of links and
    arenas each (measured: 274 MiB at 110,500 x 1,024; a small graph holds more)."""
    return rows * (2 * dimension + 800)


class Graph:
    """An HNSW graph of the rows [0, covered) of a matrix that were alive when it was built,
    keyed by their row ids (so that another process's matrix can use it: `restored`).

    `indexed[i]`: row i's current vector is in the graph. Built by `build` (any thread, with
    no lock: it touches nothing shared), then kept by the matrix under the cache's lock.
    """

    def __init__(self, alive: np.ndarray, ids: np.ndarray, dimension: int, seen: int) -> None:
        self.seen = seen  # the change log entry its vectors are as of
        self.covered = len(alive)
        self.indexed = alive.copy()
        self._added = np.flatnonzero(alive)
        self.keys = ids[self._added].copy()
        self.held = len(self._added)  # the keys in the graph, current or not
        self.attached = False
        self.index = _index(dimension)
        self.mapped = 0  # the size of the file it is mapped from (`restored`), read only

    @classmethod
    def restored(cls, saved: Saved, ids: np.ndarray, alive: np.ndarray, changed: set[int]) -> Graph:
        """A saved graph (`save`) for a matrix whose rows hold `ids`: it answers for the rows
        whose vector it holds and that were not `changed` since it was saved. Mapped from its
        file, read only: a row changed later is only no longer indexed."""
        graph = cls.__new__(cls)
        graph.seen = saved.seen
        graph.covered = len(alive)
        held = np.isin(ids, saved.keys)
        graph._added = np.flatnonzero(held)
        graph.keys = ids[graph._added].copy()
        unchanged = ~np.isin(ids, np.fromiter(changed, np.int64, len(changed)))
        graph.indexed = alive & held & unchanged
        graph.held = len(saved.keys)
        graph.attached = True
        graph.index = saved.index
        graph.mapped = saved.bytes
        return graph

    def build(self, vectors: np.ndarray) -> None:
        """Add the rows alive at the snapshot. `vectors` is the matrix's array as it was then:
        a row replaced meanwhile may be read either way, and is dropped at `attach`."""
        for start in range(0, len(self._added), _BATCH):
            rows = self._added[start : start + _BATCH]
            self.index.add(self.keys[start : start + _BATCH], vectors[rows], threads=1)

    def tune(self, vectors: np.ndarray) -> float:
        """Its search depth chosen, and its recall@10 then, against the exact scan of the rows
        it holds (`tune`). Run after `build`, in its thread."""
        batches = (
            (self.keys[start : start + _BATCH], vectors[self._added[start : start + _BATCH]])
            for start in range(0, len(self._added), _BATCH)
        )
        return tune(self.index, self.keys, batches)

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

    def checked_rows(self) -> np.ndarray:
        """The rows `agrees` compares: AGREEMENT_CHECKS of those it answers for."""
        rows = np.flatnonzero(self.indexed)
        return rows[:: max(1, len(rows) // AGREEMENT_CHECKS)][:AGREEMENT_CHECKS]

    def agrees(self, rows: np.ndarray, vectors: np.ndarray) -> bool:
        """Whether it holds `vectors`, the database's, for `rows` (`checked_rows`): a saved
        graph of another database whose change log reached as far is not taken."""
        if len(rows) == 0:
            return False
        return np.allclose(self.vectors(rows), vectors, atol=0.01)

    def _key_of(self, rows: np.ndarray) -> np.ndarray:
        return self.keys[np.searchsorted(self._added, rows)]

    def _drop(self, rows: np.ndarray) -> None:
        # A graph mapped from its file is read only: its changed rows are only not indexed.
        if len(rows) and not self.mapped:
            self.index.remove(self._key_of(rows))

    @property
    def nbytes(self) -> int:
        """What this process holds of it. A graph mapped from its file holds only its arrays:
        the file's pages are the system's page cache, shared by the processes that map it and
        given back under memory pressure (counted apart: `mapped`)."""
        arrays = self.indexed.nbytes + self._added.nbytes + self.keys.nbytes
        return arrays + (0 if self.mapped else int(self.index.memory_usage))

    def stale(self, alive: np.ndarray) -> bool:
        """Whether the rows it misses (alive, not indexed) or holds in vain (indexed once,
        changed since) pass STALE_FRACTION of the matrix's `alive` rows."""
        missed = int(np.count_nonzero(alive[self.covered :]))
        missed += int(np.count_nonzero(alive[: self.covered] & ~self.indexed))
        vain = self.held - int(np.count_nonzero(self.indexed))
        return missed + vain > STALE_FRACTION * max(1, int(np.count_nonzero(alive)))

    def candidates(
        self, query: np.ndarray, k: int, mask: np.ndarray, live: int, position: dict[int, int]
    ) -> np.ndarray | None:
        """The rows to score exactly for the k nearest of those in `mask` (the matrix's `live`
        rows that pass the filters; `position`: its row of each id): the graph's nearest that
        pass, and every row passing that the graph does not hold. None where the exact scan
        must answer: the filters leave too few rows, or too few of the graph's nearest pass
        them."""
        passing = int(np.count_nonzero(mask))
        share = passing / max(1, live)
        if share < FILTERED_FRACTION:
            return None
        outside = np.flatnonzero(mask[: self.covered] & ~self.indexed)
        tail = np.flatnonzero(mask[self.covered :]) + self.covered
        held = passing - len(outside) - len(tail)  # the graph's rows that pass
        # Filtered: twice the share's worth, as the passing rows are not spread evenly.
        count = EXTRA_CANDIDATES + (k if passing == live else math.ceil(2 * k / share))
        keys = self.index.search(query, count, threads=1).keys.tolist()
        found = np.fromiter((position.get(key, -1) for key in keys), np.int64, len(keys))
        found = found[(found >= 0) & (found < self.covered)]  # a row deleted, or added again
        found = found[mask[found] & self.indexed[found]]
        if len(found) < min(k, held):
            return None
        return np.concatenate([found, outside, tail])

    def save(self, folder: Path, name: str) -> None:
        """Write the graph for other processes (`save`). Run after `build`, in its thread."""
        save(self.index, self.keys, folder, name, self.seen)

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """These rows' vectors as the graph holds them (float16, as float32): the only copy
        a mapped matrix has of the rows it indexes (index_numpy)."""
        if not len(rows):
            return np.zeros((0, self.index.ndim), dtype=np.float32)
        return np.vstack(self.index.get(self._key_of(rows), dtype=np.float32))


def tune(index: Index, keys: np.ndarray, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> float:
    """Set `index`'s search depth to the first of EXPANSIONS whose recall@10 reaches
    TARGET_RECALL (else the deepest), and return its recall@10 there: against the exact
    nearest among the rows `batches` yields (their keys, unit vectors), for SELF_CHECKS of
    `keys` as queries (the index's vectors of them), each one's 10 nearest other rows. A
    query is answered as KNN asks the graph: EXTRA_CANDIDATES more, the best of them by
    score. The rows are read once, a batch at a time, so that a graph of vectors not held in
    memory is checked as one that is."""
    rng = np.random.default_rng(0)
    picked = keys[rng.choice(len(keys), min(SELF_CHECKS, len(keys)), replace=False)]
    if not len(picked):
        return 0.0
    queries = np.vstack(index.get(picked, dtype=np.float32))
    exact = _nearest(queries, batches, count=_RECALL_AT + 1)
    # A search computing a distance for more links than the graph has rows costs more than
    # the exact scan: not that deep.
    depths = [depth for depth in EXPANSIONS if depth * CONNECTIVITY <= len(keys)]
    for expansion in depths or EXPANSIONS[:1]:
        index.expansion_search = expansion
        found = 0
        for key, query, nearest in zip(picked.tolist(), queries, exact, strict=True):
            candidates = index.search(query, _RECALL_AT + 1 + EXTRA_CANDIDATES, threads=1).keys
            candidates = candidates[candidates != key]
            scores = np.vstack(index.get(candidates, dtype=np.float32)) @ query
            best = candidates[np.argsort(-scores)[:_RECALL_AT]]
            found += len(set(best.tolist()) & (set(nearest.tolist()) - {key}))
        recall = found / (_RECALL_AT * len(picked))
        if recall >= TARGET_RECALL:
            break
    return recall


# The k of `tune`'s recall.
_RECALL_AT = 10


def _nearest(
    queries: np.ndarray, batches: Iterable[tuple[np.ndarray, np.ndarray]], count: int
) -> np.ndarray:
    """The keys of each query's `count` nearest rows, exactly, of the rows `batches` yields."""
    best = np.full((len(queries), count), -np.inf, dtype=np.float32)
    best_keys = np.full((len(queries), count), -1, dtype=np.int64)
    for batch_keys, vectors in batches:
        scores = np.concatenate([best, queries @ vectors.T], axis=1)
        keys = np.broadcast_to(batch_keys, (len(queries), len(batch_keys)))
        both = np.concatenate([best_keys, keys], axis=1)
        top = np.argpartition(-scores, count - 1, axis=1)[:, :count]
        best = np.take_along_axis(scores, top, axis=1)
        best_keys = np.take_along_axis(both, top, axis=1)
    return best_keys


def _index(dimension: int) -> Index:
    # The matrix holds unit vectors: the inner product is the cosine.
    return Index(ndim=dimension, metric="ip", dtype="f16", **_parameters())


def _parameters() -> dict[str, int]:
    return {"connectivity": CONNECTIVITY, "expansion_add": EXPANSION_ADD}


def build(
    dimension: int, batches: Iterable[tuple[np.ndarray, np.ndarray]]
) -> tuple[Index, np.ndarray]:
    """A graph of the rows `batches` yields (their keys, unit vectors), read once: for an
    agent whose vectors are not held in memory (index_numpy's mapped matrices). Its index and
    keys, as `save` takes them."""
    index = _index(dimension)
    keys: list[np.ndarray] = []
    for batch_keys, vectors in batches:
        index.add(batch_keys, vectors, threads=1)
        keys.append(batch_keys)
    return index, np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)


def save(index: Index, keys: np.ndarray, folder: Path, name: str, seen: int) -> None:
    """Write a graph for other processes (`load`): its file, the ids it holds and the change
    log entry its vectors are as of (`seen`), each file written whole before it is named; the
    older versions of `name` go."""
    private_dir(folder)
    version = f"{name}.{seen}"
    _written(folder / f"{version}.usearch", lambda path: index.save(str(path)))
    _written(folder / f"{version}.npy", lambda path: path.write_bytes(_npy(keys)))
    pointer = json.dumps(
        {
            "format": SAVED_FORMAT,
            "seen": seen,
            "dimension": index.ndim,
            "expansion": index.expansion_search,
        }
    )
    _written(folder / f"{name}.json", lambda path: path.write_text(pointer))
    for old in folder.glob(f"{name}.*.*"):
        if not old.name.startswith(f"{version}."):
            old.unlink(missing_ok=True)


# The layout of a saved graph's files (`Graph.save`): another is not read. (A graph saved
# when builds went 64 deep is still read: it is replaced when the next build is due.)
SAVED_FORMAT = 2


@dataclass(frozen=True)
class Saved:
    """A saved graph's index mapped from its file, its keys, and the change log entry its
    vectors are as of."""

    index: Index
    keys: np.ndarray
    seen: int
    bytes: int  # the index file's size


def load(folder: Path, name: str, dimension: int, *, newer_than: int = -1) -> Saved | None:
    """The graph saved as `name` in `folder`, mapped read only; None when there is none of
    this layout and dimension as of a log entry after `newer_than`, or its files cannot be
    read."""
    try:
        pointer = json.loads((folder / f"{name}.json").read_text())
        if pointer.get("format") != SAVED_FORMAT or pointer.get("dimension") != dimension:
            return None
        if pointer["seen"] <= newer_than:
            return None
        version = f"{name}.{pointer['seen']}"
        keys = np.load(folder / f"{version}.npy")
        path = folder / f"{version}.usearch"
        index = Index.restore(
            str(path), view=True, expansion_search=int(pointer["expansion"]), **_parameters()
        )
        size = path.stat().st_size
    except (OSError, ValueError, KeyError, RuntimeError):
        return None
    if index is None or len(index) != len(keys):
        return None
    return Saved(index, keys, int(pointer["seen"]), size)


@contextmanager
def building(folder: Path, name: str) -> Iterator[bool]:
    """Whether this process may build the graph saved as `name` now: the lock file beside
    it, held while the body runs, is not held by another (which then builds and saves it).
    Where no lock file can be made (a full disk, a read-only folder) no graph can be saved
    either: this process builds its own."""
    try:
        private_dir(folder)
        descriptor = os.open(folder / f"{name}.lock", os.O_CREAT | os.O_RDWR, PRIVATE_FILE_MODE)
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(descriptor)  # the lock goes with it


def discard(folder: Path, prefix: str) -> None:
    """Delete the saved graphs whose names start with `prefix`."""
    for path in folder.glob(f"{prefix}*"):
        path.unlink(missing_ok=True)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _written(path: Path, write: Callable[[Path], object]) -> None:
    """`write` to a temporary name beside `path`, then renamed: a reader finds the whole file
    or the one before it. A failure (a full disk) leaves nothing behind. Private to the
    service's user, as everything it writes (orca_memory.core.files)."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        write(temporary)
        os.chmod(temporary, PRIVATE_FILE_MODE)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
