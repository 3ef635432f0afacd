"""The SQLite engine's derived vector index: each agent's vectors as a numpy matrix.

vec0 is the durable store and the source of truth, but it has no ANN index and its scan has a
floor: KNN over one agent's 100,000 vectors of 1,024 dimensions took several times as long
in vec0 as a numpy product over the same rows (docs/BENCHMARKS.md, "The derived vector
index"). So this process keeps, per (database, vector table, agent), a float32 matrix of
the agent's unit vectors with their metadata, and answers KNN from it exactly (the same
cosine similarity, the same top k), and the similarity of given rows (`similarities`).

Kept current through the change log `vector_changes`, written by `index_sqlite` in the same
transaction as every vector put or delete: before answering, a matrix reads the log entries
after the last one it applied (one indexed query; nothing new is the common case) and re-reads
those rows from vec0's storage. So a vector is found as soon as its write commits, by every
process (web workers and the task worker alike). A reset marker (`row_id` NULL, `agent_id`
'') stands for "every row of the table changed" (the vector tables were dropped); the log keeps
its newest `RETAIN_CHANGES` entries, and a matrix that fell behind those, or a log that
went backwards (a different database file), is rebuilt from vec0's storage.

Only committed data is cached: inside a transaction, `index_sqlite.knn` asks vec0 (it sees the
transaction's own writes, and nothing of a rolled-back one can stay here). Memory is bounded
per process (`ORCA_VECTOR_CACHE_MB`): the least recently used matrices are dropped.

A matrix of `index_ann.ANN_MIN_ROWS` live rows or more also keeps an approximate (HNSW) graph
when both fit the bound: built in a background thread, kept current by the same puts and
removes, it chooses the candidates that the matrix then scores exactly (index_ann). The
process that builds a graph saves it in a folder beside the database file (`SAVED_GRAPHS`),
one process at a time (a lock file: index_ann.building); a matrix of another process, or
after a restart, maps it (`_restore_graph`, looking for it every LOOK_SECONDS while it has
none) where the change log still reaches back to it, and builds none of its own.

An agent whose vectors alone are over the bound (1M x 1,024 is 4 GB) is held mapped: the
matrix keeps its rows' ids and metadata, not their vectors. Its saved graph, mapped read only,
holds them as float16 and answers alone, and the rows written since it was saved are held
apart (`_Loose`). That graph is built from vec0's storage a batch at a time in a background
thread (`_build_saved`); vec0 answers the agent until it is saved, and answers an agent too
small for a graph.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connections

from memory import index_ann
from memory.index_schema import VECTOR_TABLES, Filter, Hit, KnnPath, VectorTable

logger = logging.getLogger(__name__)

CHANGES = "vector_changes"
# The folder beside the database file where graphs are saved (`_saved_at`).
SAVED_GRAPHS = "-graphs"
# A process that has not looked at the log for this many vector writes rebuilds its matrices.
RETAIN_CHANGES = 100_000
# A matrix looks for a newer saved graph at most this often while it has none, or a stale one
# (another process may be building it).
LOOK_SECONDS = 10.0
# The chunks (128 rows each) read at a time while a mapped matrix's graph is built: 32 MiB of
# vectors at 1,024 dimensions.
BUILD_CHUNKS = 64
# Matrices grow by a quarter: appending one vector copies nothing most of the time, and the
# spare room stays small next to the matrix.
_GROWTH = 1.25

_OPERATORS = {
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1, so that a dot product is vec0's cosine similarity (zero rows
    stay zero: similarity 0, where vec0 gives no meaningful distance either)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class _Column:
    """One metadata column. Text is stored as integer codes of its distinct values, so that a
    filter is evaluated once per distinct value, then looked up per row."""

    def __init__(self, kind: str, capacity: int) -> None:
        self.text = kind == "text"
        self.values = np.zeros(capacity, dtype=np.int32 if self.text else np.int64)
        self.categories: list[object] = []
        self.codes: dict[object, int] = {}

    def encode(self, value: object) -> int:
        if not self.text:
            return int(value)  # type: ignore[call-overload]
        if value not in self.codes:
            self.codes[value] = len(self.categories)
            self.categories.append(value)
        return self.codes[value]

    def mask(self, op: str, value: object, size: int) -> np.ndarray:
        compare = _OPERATORS[op]
        if not self.text:
            return compare(self.values[:size], value)
        matching = np.array(
            [c is not None and bool(compare(c, value)) for c in self.categories], dtype=bool
        )
        return matching[self.values[:size]] if len(matching) else np.zeros(size, dtype=bool)


class _Loose:
    """A mapped matrix's own vectors: of the rows its graph does not answer for (written since
    it was saved), by row."""

    def __init__(self, dimension: int) -> None:
        self.slots: dict[int, int] = {}
        self.vectors = np.zeros((16, dimension), dtype=np.float32)

    def put(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        for row, vector in zip(rows.tolist(), vectors, strict=True):
            slot = self.slots.setdefault(row, len(self.slots))
            if slot == len(self.vectors):
                self.vectors = np.resize(self.vectors, (int(slot * _GROWTH) + 1, vectors.shape[1]))
            self.vectors[slot] = vector

    def get(self, rows: np.ndarray) -> np.ndarray:
        return self.vectors[[self.slots[row] for row in rows.tolist()]]

    @property
    def nbytes(self) -> int:
        return self.vectors.nbytes + 100 * len(self.slots)


@dataclass
class Matrix:
    """One agent's vectors of one table: row i is `ids[i]`, alive unless deleted since."""

    table: VectorTable
    dimension: int
    seen: int  # the last change log entry applied
    ids: np.ndarray
    vectors: np.ndarray
    alive: np.ndarray
    columns: dict[str, _Column]
    position: dict[int, int]
    size: int = 0
    graph: index_ann.Graph | None = None  # answers KNN with the matrix (index_ann)
    building: index_ann.Graph | None = None  # its successor, being built in a thread
    # A graph failed to build, found too few of the nearest (index_ann.MIN_RECALL), or came out
    # over the memory bound: exact from then on.
    graph_refused: bool = False
    # Mapped (over the bound): `vectors` holds none; its graph is the saved one, mapped read
    # only, and `loose` holds every live row that graph does not answer for.
    mapped: bool = False
    loose: _Loose | None = None
    saving: bool = False  # a mapped matrix's graph being built and saved (`_build_saved`)
    looked: float = -LOOK_SECONDS  # when it last looked for a saved graph (`_looks_again`)

    @classmethod
    def empty(cls, table: VectorTable, dimension: int, seen: int, capacity: int) -> Matrix:
        capacity = max(capacity, 16)
        return cls(
            table,
            dimension,
            seen,
            np.zeros(capacity, dtype=np.int64),
            np.zeros((capacity, dimension), dtype=np.float32),
            np.zeros(capacity, dtype=bool),
            {name: _Column(kind, capacity) for name, kind in table.metadata.items()},
            {},
        )

    @property
    def nbytes(self) -> int:
        arrays = [self.ids, self.vectors, self.alive, *(c.values for c in self.columns.values())]
        # The id -> row dict costs about 100 bytes an entry in CPython.
        total = sum(a.nbytes for a in arrays) + 100 * len(self.position)
        if self.graph is not None:
            total += self.graph.nbytes
        if self.loose is not None:
            total += self.loose.nbytes
        if self.building is not None:  # growing in its thread: counted at its final size
            total += index_ann.estimated_bytes(len(self.position), self.dimension)
        return total

    def _changed(self, rows: np.ndarray) -> None:
        """These rows are replaced or deleted: the graphs no longer answer for them."""
        for graph in (self.graph, self.building):
            if graph is not None:
                graph.forget(rows)

    def _reserve(self, extra: int) -> None:
        capacity = len(self.ids)
        if self.size + extra <= capacity:
            return
        capacity = max(int(capacity * _GROWTH), self.size + extra)
        self.ids = np.resize(self.ids, capacity)
        self.alive = np.resize(self.alive, capacity)
        if not self.mapped:
            vectors = np.zeros((capacity, self.dimension), dtype=np.float32)
            vectors[: self.size] = self.vectors[: self.size]
            self.vectors = vectors
        for column in self.columns.values():
            column.values = np.resize(column.values, capacity)

    def put(self, rows: Rows) -> None:
        """Insert or replace these rows (read from vec0's storage: `read_chunks`)."""
        if not len(rows.ids):
            return
        if self.dimension == 0:  # built while the agent had no vector
            self.dimension = rows.vectors.shape[1]
            self.vectors = np.zeros((len(self.ids), self.dimension), dtype=np.float32)
        at = self._place(rows)
        if self.loose is not None:
            self.loose.put(at, unit(rows.vectors))
        else:
            self.vectors[at] = unit(rows.vectors)

    def _place(self, rows: Rows) -> np.ndarray:
        """Insert or replace these rows' ids and metadata; the rows they are at."""
        self._reserve(len(rows.ids))
        ids = rows.ids.tolist()
        at = np.fromiter((self.position.get(i, -1) for i in ids), np.int64, len(ids))
        new = np.flatnonzero(at < 0)  # appended in order, after the rows held
        at[new] = np.arange(self.size, self.size + len(new))
        self.position.update(zip(rows.ids[new].tolist(), at[new].tolist(), strict=True))
        self._changed(at)
        self.size += len(new)
        self.ids[at] = rows.ids
        self.alive[at] = True
        for name, column in self.columns.items():
            column.values[at] = [column.encode(value) for value in rows.metadata[name]]
        return at

    def similarities(self, query: np.ndarray, row_ids: Iterable[int]) -> list[Hit]:
        """The similarity of `query` to each of these rows that holds a vector, in their order:
        the same product as `knn`'s."""
        held = [row_id for row_id in row_ids if row_id in self.position]
        at = np.fromiter((self.position[row_id] for row_id in held), np.int64, len(held))
        scores = self._mapped_scores(at, query) if self.mapped else self.vectors[at] @ query
        return [Hit(row_id, float(score)) for row_id, score in zip(held, scores, strict=True)]

    def remove(self, row_ids: Iterable[int]) -> None:
        gone = [self.position.pop(row_id) for row_id in row_ids if row_id in self.position]
        self.alive[gone] = False
        self._changed(np.array(gone, dtype=np.int64))

    def knn(self, query: np.ndarray, k: int, filters: Sequence[Filter]) -> list[Hit]:
        size = self.size
        mask = self.alive[:size].copy()
        for column, op, value in filters:
            mask &= self.columns[column].mask(op, value, size)
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return []
        if self.graph is not None and len(rows) > k:
            candidates = self.graph.candidates(query, k, mask, len(self.position), self.position)
            if candidates is not None:
                rows = candidates
        # A narrow filter (one session) gathers its rows; a wide one scores every row, which
        # costs less than copying most of the matrix.
        if self.mapped:
            scores = self._mapped_scores(rows, query)
        elif len(rows) * 4 < size:
            scores = self.vectors[rows] @ query
        else:
            scores = (self.vectors[:size] @ query)[rows]
        top = np.argpartition(-scores, k - 1)[:k] if len(rows) > k else np.arange(len(rows))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(int(self.ids[rows[i]]), float(scores[i])) for i in top]

    def _mapped_scores(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """A mapped matrix's scores of these rows: from its graph's float16 copy of the rows it
        answers for (within about 1e-3 of the exact cosine), from `loose` for the others."""
        assert self.graph is not None and self.loose is not None
        held = np.zeros(len(rows), dtype=bool)
        covered = rows < self.graph.covered
        held[covered] = self.graph.indexed[rows[covered]]
        scores = np.empty(len(rows), dtype=np.float32)
        scores[held] = self.graph.vectors(rows[held]) @ query
        scores[~held] = self.loose.get(rows[~held]) @ query
        return scores


@dataclass(frozen=True)
class CacheReport:
    matrices: int
    graphs: int  # matrices that also keep an approximate graph (index_ann)
    vectors: int
    bytes: int
    limit_bytes: int
    mapped_bytes: int  # the saved graphs' files mapped read only, not in `bytes` (index_ann)


class _Cache:
    """This process's matrices, least recently used first, within `limit` bytes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.matrices: OrderedDict[tuple[str, str, str], Matrix] = OrderedDict()
        # Agents whose matrix alone was over the limit, mapped or not: vec0 answers them from
        # then on.
        self.oversized: set[tuple[str, str, str]] = set()
        # (database, table) -> whether its vec0 storage has a layout read here.
        self.formats: dict[tuple[str, str], bool] = {}
        self.builds: list[threading.Thread] = []  # graphs being built (index_ann)

    def clear(self) -> None:
        with self.lock:
            self.matrices.clear()
            self.oversized.clear()
            self.formats.clear()

    def report(self) -> CacheReport:
        with self.lock:
            return CacheReport(
                len(self.matrices),
                sum(m.graph is not None for m in self.matrices.values()),
                sum(len(m.position) for m in self.matrices.values()),
                sum(m.nbytes for m in self.matrices.values()),
                _limit(),
                sum(m.graph.mapped for m in self.matrices.values() if m.graph is not None),
            )


_CACHE = _Cache()


def _limit() -> int:
    return int(settings.ORCA.vector_cache_mb) * 1024 * 1024


def enabled(using: str) -> bool:
    """Whether KNN may be answered here: the cache is on and only committed data is read."""
    return _limit() > 0 and not connections[using].in_atomic_block


def clear() -> None:
    """Forget every matrix (tests that empty the vector tables behind the log's back)."""
    _CACHE.clear()


def report() -> CacheReport:
    return _CACHE.report()


def settle() -> None:
    """Wait for the graphs being built (tests, and the benchmark's warm-up)."""
    join_builds(_CACHE.lock, _CACHE.builds)


def join_builds(lock: threading.Lock, builds: list[threading.Thread]) -> None:
    """Wait for every thread in `builds` (a list `lock` guards), those started meanwhile
    too; the finished ones leave it. The derived indexes' background builds (this module's
    graphs, index_text's indexes)."""
    while True:
        with lock:
            builds[:] = [thread for thread in builds if thread.is_alive()]
            if not builds:
                return
            thread = builds[0]
        thread.join()


def knn_path(using: str) -> KnnPath:
    """Whether KNN is answered here or by vec0's scan, for health: the cache on, and every
    vector table's storage of a layout read here. Either way vec0 answers inside a
    transaction, and for an agent whose matrix alone is over the memory bound."""
    if _limit() == 0:
        return KnnPath("vec0_scan", "the derived index is off (vector_cache_mb = 0)")
    execute = _execute(using)
    versions = {table.name: storage_version(table, execute) for table in VECTOR_TABLES}
    unread = [f"{name} ({v})" for name, v in versions.items() if v not in KNOWN_FORMATS]
    known = ", ".join(sorted(KNOWN_FORMATS))
    if unread:
        return KnnPath(
            "vec0_scan",
            f"the derived index reads the storage of sqlite-vec {known} only, and these vector "
            f"tables were made by another version: {', '.join(unread)}; vec0's scan answers "
            "them, slower on large agents (docs/BENCHMARKS.md)",
        )
    return KnnPath(
        "memory_index",
        f"each process's derived index of vec0's storage (made by sqlite-vec {known}); vec0's "
        "scan answers inside a transaction, and an agent over vector_cache_mb until its saved "
        "graph is built",
    )


def knn(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    k: int,
    filters: Sequence[Filter],
    using: str,
) -> list[Hit] | None:
    """The k nearest of the agent's vectors from its matrix, or None where vec0 must answer
    (the agent's matrix is over the memory bound, or the table's storage is of a layout not
    read here)."""
    return _answered(
        table, agent_id, embedding, using, lambda matrix, query: matrix.knn(query, k, filters)
    )


def similarities(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    row_ids: Iterable[int],
    using: str,
) -> list[Hit] | None:
    """The cosine similarity of the embedding to each of these rows of the agent's matrix that
    holds a vector, or None where vec0 must answer (as for `knn`)."""
    return _answered(
        table,
        agent_id,
        embedding,
        using,
        lambda matrix, query: matrix.similarities(query, row_ids),
    )


def _answered(
    table: VectorTable,
    agent_id: str,
    embedding: Sequence[float],
    using: str,
    ask: Callable[[Matrix, np.ndarray], list[Hit]],
) -> list[Hit] | None:
    """`ask`'s answer from the agent's current matrix and the embedding as a unit vector,
    under the cache's lock as every use of a matrix; None where vec0 must answer."""
    database = str(connections[using].settings_dict["NAME"])
    key = (database, table.name, agent_id)
    with _CACHE.lock:
        if key in _CACHE.oversized or not _readable(database, table, using):
            return None
        matrix = _current(key, table, agent_id, using)
        if matrix is None or (matrix.mapped and matrix.graph is None):
            return None
        return ask(matrix, unit(np.asarray(embedding, dtype=np.float32)))


def _readable(database: str, table: VectorTable, using: str) -> bool:
    if (database, table.name) not in _CACHE.formats:
        _CACHE.formats[(database, table.name)] = readable(table, _execute(using))
    return _CACHE.formats[(database, table.name)]


def _current(
    key: tuple[str, str, str], table: VectorTable, agent_id: str, using: str
) -> Matrix | None:
    """The agent's matrix brought up to the log's newest entry (built if missing or behind
    what the log still holds); None if it would not fit the memory bound."""
    first, last = _log_bounds(using)
    matrix = _CACHE.matrices.pop(key, None)
    grown = False  # only then may the cache be over its bound
    if matrix is not None and (matrix.seen > last or matrix.seen < first - 1):
        matrix = None  # the log went backwards (another database file), or was pruned past it
    if matrix is not None and last > matrix.seen:
        changed = _changed_rows(table, agent_id, matrix.seen, using)
        if changed is None:
            matrix = None  # the table was reset
        else:
            rows = _read(table, agent_id, changed, using)
            matrix.put(rows)
            matrix.remove(set(changed) - set(rows.ids.tolist()))
            matrix.seen = last
            grown = True
    if matrix is not None and len(matrix.position) * 2 < matrix.size:
        matrix = None  # mostly deleted rows: a rebuild packs it
    if matrix is None:
        matrix = _build(table, agent_id, last, using)
        grown = True
    if matrix is None:
        _CACHE.oversized.add(key)
        return None
    looks = _looks_again(matrix)
    if looks:
        _restore_graph(matrix, key, first, using)
    _CACHE.matrices[key] = matrix  # now the most recently used
    if grown or looks:
        _start_graph(matrix, key, using)
        _evict()
    return matrix


def _looks_again(matrix: Matrix) -> bool:
    """Whether the matrix looks for a saved graph now (another process's, or the one saved
    before a restart), and for a build of its own if there is none: it has none or a stale
    one, and did not look in the last LOOK_SECONDS."""
    now = time.monotonic()
    if now - matrix.looked < LOOK_SECONDS:
        return False
    matrix.looked = now
    return matrix.graph is None or matrix.graph.stale(matrix.alive[: matrix.size])


def _saved_at(key: tuple[str, str, str]) -> tuple[Path, str] | None:
    """Where the agent's graph of a table is saved: `_saved_folder`, under a name of the
    agent's `_saved_prefix` and the table. None for a database that is no file."""
    database, table, agent_id = key
    folder = _saved_folder(database)
    return None if folder is None else (folder, f"{_saved_prefix(agent_id)}{table}")


def drop_saved_graphs(database: str, agent_id: str) -> None:
    """Delete the agent's saved graphs, of every table (index.drop_saved_graphs)."""
    folder = _saved_folder(database)
    if folder is not None:
        index_ann.discard(folder, _saved_prefix(agent_id))


def _saved_folder(database: str) -> Path | None:
    """The folder beside the database file where graphs are saved; None for a database that
    is no file."""
    if database.startswith("file:") or database in ("", ":memory:"):
        return None
    return Path(f"{database}{SAVED_GRAPHS}")


def _saved_prefix(agent_id: str) -> str:
    """What the names of an agent's saved graphs start with: a digest of its id."""
    return hashlib.sha256(agent_id.encode()).hexdigest()[:24] + "-"


def _restore_graph(matrix: Matrix, key: tuple[str, str, str], first: int, using: str) -> None:
    """The graph another process built and saved for the matrix (index_ann.load), where the
    change log still says what changed since, it is newer than the matrix's and fits the
    memory bound: a restart or a second worker then needs no build of its own. A mapped
    matrix takes the vectors of the rows it does not answer for into `loose`."""
    where = _saved_at(key)
    if where is None or len(matrix.position) < index_ann.ANN_MIN_ROWS:
        return
    held = matrix.graph.seen if matrix.graph is not None else -1
    saved = index_ann.load(*where, matrix.dimension, newer_than=held)
    if saved is None or not first - 1 <= saved.seen <= matrix.seen:
        return  # none newer, the log was pruned past it, or it is of another database
    changed = _changed_rows(matrix.table, key[2], saved.seen, using)
    if changed is None:
        return  # the table was reset since
    size = matrix.size
    graph = index_ann.Graph.restored(saved, matrix.ids[:size], matrix.alive[:size], set(changed))
    if matrix.mapped:
        _restore_mapped(matrix, graph, key[2], using)
    elif (
        graph.agrees(checked := graph.checked_rows(), matrix.vectors[checked])
        and matrix.nbytes + graph.nbytes <= _limit()
    ):
        matrix.graph = graph


def _restore_mapped(matrix: Matrix, graph: index_ann.Graph, agent_id: str, using: str) -> None:
    """Take `graph` for a mapped matrix where it agrees with vec0 and the rows it does not
    answer for fit the bound beside the rest: their vectors are read from vec0 into `loose`."""
    rows = np.flatnonzero(matrix.alive[: matrix.size] & ~graph.indexed)
    held = matrix.nbytes - (matrix.loose.nbytes if matrix.loose is not None else 0)
    if held + len(rows) * matrix.dimension * 4 > _limit():
        return  # too stale: a new one is built (`_start_graph`)
    checked = graph.checked_rows()
    if not graph.agrees(checked, _vectors_of(matrix, checked, agent_id, using)):
        return
    loose = _Loose(matrix.dimension)
    loose.put(rows, _vectors_of(matrix, rows, agent_id, using))
    matrix.graph, matrix.loose = graph, loose


def _vectors_of(matrix: Matrix, rows: np.ndarray, agent_id: str, using: str) -> np.ndarray:
    """These rows' unit vectors as vec0 holds them, in their order (rows deleted meanwhile:
    zero, never found as near)."""
    ids = matrix.ids[rows]
    read = _read(matrix.table, agent_id, ids.tolist(), using)
    found = dict(zip(read.ids.tolist(), unit(read.vectors), strict=True))
    vectors = np.zeros((len(rows), matrix.dimension), dtype=np.float32)
    for at, row_id in enumerate(ids.tolist()):
        if row_id in found:
            vectors[at] = found[row_id]
    return vectors


def _start_graph(matrix: Matrix, key: tuple[str, str, str], using: str) -> None:
    """Build the matrix a graph in a thread where it has none or a stale one and is large
    enough: in memory where both fit the memory bound (index_ann), saved for the other
    processes; for a mapped matrix, from vec0's storage and saved (`_build_saved`)."""
    live = len(matrix.position)
    if matrix.building is not None or matrix.saving or matrix.graph_refused:
        return
    if live < index_ann.ANN_MIN_ROWS:
        return
    if matrix.graph is not None and not matrix.graph.stale(matrix.alive[: matrix.size]):
        return
    where = _saved_at(key)
    if matrix.mapped:
        if where is not None:
            matrix.saving = True
            _thread(_build_saved, matrix, key, where, matrix.seen, using)
        return
    graph_bytes = index_ann.estimated_bytes(live, matrix.dimension)
    if matrix.nbytes - (matrix.graph.nbytes if matrix.graph else 0) + graph_bytes > _limit():
        return
    size = matrix.size
    graph = index_ann.Graph(matrix.alive[:size], matrix.ids[:size], matrix.dimension, matrix.seen)
    matrix.building = graph
    # The array as it is now: rows appended later, or after it was grown, are not in the graph.
    _thread(_build_graph, matrix, graph, matrix.vectors, where)


def _thread(target: Callable[..., None], *args: object) -> None:
    thread = threading.Thread(target=target, args=args, name="orca-ann", daemon=True)
    _CACHE.builds.append(thread)
    thread.start()


def _build_graph(
    matrix: Matrix,
    graph: index_ann.Graph,
    vectors: np.ndarray,
    where: tuple[Path, str] | None,
) -> None:
    """The thread's work: the graph built without the cache's lock (usearch releases the GIL)
    and saved, by one process at a time (index_ann.building: another's graph is mapped once
    saved, `_looks_again`), then put in place of the matrix's old one under the lock."""
    with index_ann.building(*where) if where is not None else nullcontext(True) as ours:
        built = _built(matrix, graph, vectors, where) if ours else None
    with _CACHE.lock:
        matrix.building = None
        if not ours or not any(held is matrix for held in _CACHE.matrices.values()):
            return  # another process builds it, or dropped meanwhile (evicted, rebuilt, `clear`)
        old = matrix.graph.nbytes if matrix.graph is not None else 0
        if built is None or matrix.nbytes - old + built.nbytes > _limit():
            matrix.graph_refused = True
            return
        built.attach()
        matrix.graph = built
        _evict()


def _built(
    matrix: Matrix, graph: index_ann.Graph, vectors: np.ndarray, where: tuple[Path, str] | None
) -> index_ann.Graph | None:
    """`graph` built from `vectors` and saved; None where it failed or finds too few of the
    nearest (index_ann.MIN_RECALL). A graph that could not be saved is kept all the same."""
    try:
        graph.build(vectors)
        recall = graph.tune(vectors)
    except Exception:
        logger.exception("building an approximate vector index failed; exact search goes on")
        return None
    if recall < index_ann.MIN_RECALL:
        _warn_recall(matrix.table, recall)
        return None
    if where is not None:
        try:
            graph.save(*where)
        except (OSError, RuntimeError) as error:  # a full disk: this process keeps it all the same
            logger.warning("an approximate vector index could not be saved (%s)", error)
    return graph


def _build_saved(
    matrix: Matrix, key: tuple[str, str, str], where: tuple[Path, str], seen: int, using: str
) -> None:
    """The thread's work for a mapped matrix: its graph built from vec0's storage a batch at
    a time, as of log entry `seen`, and saved, by one process at a time (index_ann.building);
    the matrix then maps it (`_restore_graph`: the rows changed since `seen` go to `loose`).
    The graph is held in this process's memory while it is built (about 2.8 GB at 1M x
    1,024): once, for the agent's lifetime and each tenth it grows (STALE_FRACTION)."""
    refused = False
    try:
        with index_ann.building(*where) as ours:
            if ours:
                graph, keys = index_ann.build(
                    matrix.dimension, _batches(matrix.table, key[2], using)
                )
                recall = index_ann.tune(graph, keys, _batches(matrix.table, key[2], using))
                refused = recall < index_ann.MIN_RECALL
                if refused:
                    _warn_recall(matrix.table, recall)
                else:
                    index_ann.save(graph, keys, *where, seen)
    except Exception:  # a full disk while saving too: vec0 goes on answering
        logger.exception("building a large agent's approximate vector index failed")
        refused = True
    finally:
        connections[using].close()  # this thread's own
    with _CACHE.lock:
        matrix.saving = False
        matrix.graph_refused = refused
        matrix.looked = -LOOK_SECONDS  # look for it at the next query


def _batches(
    table: VectorTable, agent_id: str, using: str
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The agent's rows from vec0's storage, BUILD_CHUNKS chunks at a time: their ids and unit
    vectors."""
    execute = _execute(using)
    chunks = [
        chunk_id
        for (chunk_id,) in execute(
            f"SELECT chunk_id FROM {table.name}_chunks WHERE partition00 = %s ORDER BY chunk_id",
            [agent_id],
        )
    ]
    for start in range(0, len(chunks), BUILD_CHUNKS):
        part = chunks[start : start + BUILD_CHUNKS]
        rows = read_chunks(table, execute, f"c.chunk_id IN ({', '.join(['%s'] * len(part))})", part)
        if len(rows.ids):
            yield rows.ids, unit(rows.vectors)


def _warn_recall(table: VectorTable, recall: float) -> None:
    logger.warning(
        "%s: an approximate index found %.2f of the nearest vectors (%.2f needed): they have "
        "too few near neighbours for it; exact search goes on",
        table.name,
        recall,
        index_ann.MIN_RECALL,
    )


# What every KNN pays to know whether its matrix is current: two lookups of the log's key.
LOG_BOUNDS = f"SELECT (SELECT min(id) FROM {CHANGES}), (SELECT max(id) FROM {CHANGES})"


def _log_bounds(using: str) -> tuple[int, int]:
    with connections[using].cursor() as cursor:
        cursor.execute(LOG_BOUNDS)
        first, last = cursor.fetchone()
    return first or 0, last or 0


def _changed_rows(table: VectorTable, agent_id: str, after: int, using: str) -> list[int] | None:
    """The rows of the agent changed since log entry `after`; None after a reset marker."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT row_id FROM {CHANGES} WHERE table_name = %s AND agent_id IN (%s, '') "
            "AND id > %s",
            [table.name, agent_id, after],
        )
        rows = [row_id for (row_id,) in cursor.fetchall()]
    return None if None in rows else list(dict.fromkeys(rows))


# --- reading vec0's storage -----------------------------------------------------------------
#
# vec0 reads a row at a time slowly: its own scan of one agent's vectors walks every row of
# the table, and each lookup by key costs its own query (docs/BENCHMARKS.md, "The derived
# vector index"). Its storage
# is plain tables, read here a chunk (128 rows) at a time: `<t>_chunks` (the partition, a
# validity bitmap and the rows' ids), `<t>_vector_chunks00` (the chunk's float32 vectors),
# `<t>_metadatachunks<NN>` (per metadata column: int64 values, or text as a 4-byte length
# and a 12-byte prefix, the longer texts whole in `<t>_metadatatext<NN>` by row id) and
# `<t>_rowids` (a row's chunk). That layout is sqlite-vec's, so it is read only from tables
# created by a version it was checked against (`<t>_info`); others are answered by vec0.
# tests/test_vector_cache.py fails when the installed sqlite-vec writes a version not here.
KNOWN_FORMATS = frozenset({"v0.1.9"})
_TEXT_ENTRY = np.dtype([("length", "<i4"), ("prefix", "S12")])
_TEXT_PREFIX = 12


@dataclass(frozen=True)
class Rows:
    """Rows of a vector table: ids, their float32 vectors and each metadata column's values."""

    ids: np.ndarray
    vectors: np.ndarray
    metadata: dict[str, Sequence[object]]


Execute = Callable[[str, Sequence[object]], list[tuple]]


def storage_version(table: VectorTable, execute: Execute) -> str | None:
    """The sqlite-vec version that created this table's storage, as vec0 records it."""
    rows = execute(f"SELECT value FROM {table.name}_info WHERE key = 'CREATE_VERSION'", [])
    return rows[0][0] if rows else None


def readable(table: VectorTable, execute: Execute) -> bool:
    """Whether this table's storage has the layout read here."""
    return storage_version(table, execute) in KNOWN_FORMATS


def chunks_sql(table: VectorTable, where: str, *, vectors: bool = True) -> str:
    """The statement reading the chunks matching `where` (over `c`, the chunks table): their
    validity, ids, vectors (or NULL) and each metadata column's data.

    vec0 declares its tables' key `rowid PRIMARY KEY` without a type, so the column has no
    affinity and `rowid = +c.chunk_id` (an INTEGER column) cannot use its index: SQLite then
    scanned each table once per chunk, 255 s for 1M vectors' 7,813 chunks. `+c.chunk_id` has
    no affinity either, so the comparison uses the index (1.4 s).
    """
    data = "".join(f", m{i}.data" for i in range(len(table.metadata)))
    joins = "".join(
        f" JOIN {table.name}_metadatachunks{i:02d} AS m{i} ON m{i}.rowid = +c.chunk_id"
        for i in range(len(table.metadata))
    )
    if not vectors:
        return (
            f"SELECT c.validity, c.rowids, NULL{data} FROM {table.name}_chunks AS c{joins} "
            f"WHERE {where}"
        )
    return (
        f"SELECT c.validity, c.rowids, v.vectors{data} FROM {table.name}_chunks AS c "
        f"JOIN {table.name}_vector_chunks00 AS v ON v.rowid = +c.chunk_id{joins} WHERE {where}"
    )


def read_chunks(
    table: VectorTable,
    execute: Execute,
    where: str,
    params: list[object],
    *,
    vectors: bool = True,
) -> Rows:
    """The valid rows of the chunks matching `where` (over `c`, the chunks table); without
    `vectors`, their ids and metadata only (each row's vector of width 0)."""
    columns = list(table.metadata)
    chunks = execute(chunks_sql(table, where, vectors=vectors), params)
    ids, read, metadata = [], [], {name: [] for name in columns}
    for validity, rowids, blob, *values in chunks:
        slots = len(rowids) // 8
        valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[:slots]
        valid = valid.astype(bool)
        chunk_ids = np.frombuffer(rowids, np.int64)[valid]
        ids.append(chunk_ids)
        if blob is None:
            read.append(np.zeros((len(chunk_ids), 0), np.float32))
        else:
            read.append(np.frombuffer(blob, np.float32).reshape(slots, -1)[valid])
        for i, (name, value) in enumerate(zip(columns, values, strict=True)):
            if table.metadata[name] == "integer":
                metadata[name].extend(np.frombuffer(value, np.int64)[valid].tolist())
            else:
                entries = np.frombuffer(value, _TEXT_ENTRY)[valid]
                metadata[name].extend(_texts(table, i, chunk_ids, entries, execute))
    if not ids:
        return Rows(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), metadata)
    return Rows(np.concatenate(ids), np.concatenate(read), metadata)


def _texts(
    table: VectorTable, column: int, ids: np.ndarray, entries: np.ndarray, execute: Execute
) -> list[str]:
    long = [int(i) for i, e in zip(ids, entries, strict=True) if e["length"] > _TEXT_PREFIX]
    whole: dict[int, str] = {}
    if long:
        whole = dict(
            execute(
                f"SELECT rowid, data FROM {table.name}_metadatatext{column:02d} "
                f"WHERE rowid IN ({', '.join(['%s'] * len(long))})",
                long,
            )
        )
    return [
        whole[int(i)] if e["length"] > _TEXT_PREFIX else e["prefix"][: e["length"]].decode()
        for i, e in zip(ids, entries, strict=True)
    ]


def _execute(using: str) -> Execute:
    def execute(sql: str, params: Sequence[object]) -> list[tuple]:
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    return execute


def _read(table: VectorTable, agent_id: str, row_ids: Sequence[int], using: str) -> Rows:
    """These rows of the agent as vec0 holds them now (those deleted are missing): the
    chunks they are in, read whole."""
    execute = _execute(using)
    chunk_ids: set[int] = set()
    for start in range(0, len(row_ids), 500):
        part = row_ids[start : start + 500]
        chunk_ids.update(
            chunk_id
            for (chunk_id,) in execute(
                f"SELECT chunk_id FROM {table.name}_rowids "
                f"WHERE rowid IN ({', '.join(['%s'] * len(part))})",
                part,
            )
        )
    if not chunk_ids:
        return read_chunks(table, execute, "0", [])
    rows = read_chunks(
        table,
        execute,
        f"c.partition00 = %s AND c.chunk_id IN ({', '.join(['%s'] * len(chunk_ids))})",
        [agent_id, *chunk_ids],
    )
    wanted = np.isin(rows.ids, list(row_ids))
    return Rows(
        rows.ids[wanted],
        rows.vectors[wanted],
        {
            name: [v for v, w in zip(values, wanted, strict=True) if w]
            for name, values in rows.metadata.items()
        },
    )


def _build(table: VectorTable, agent_id: str, seen: int, using: str) -> Matrix | None:
    """The agent's matrix read from vec0's storage (its partition): mapped if its vectors are
    over the memory bound and it is large enough for a graph; None if even that is over the
    bound, or it is too small. The log was read before: a row written meanwhile is read again
    from the log next time."""
    execute = _execute(using)
    ((vector_bytes, slots),) = execute(
        f"SELECT coalesce(sum(length(v.vectors)), 0), coalesce(sum(length(c.rowids)), 0) / 8 "
        f"FROM {table.name}_chunks AS c "
        f"JOIN {table.name}_vector_chunks00 AS v ON v.rowid = +c.chunk_id "
        "WHERE c.partition00 = %s",
        [agent_id],
    )
    if vector_bytes <= _limit():
        rows = read_chunks(table, execute, "c.partition00 = %s", [agent_id])
        matrix = Matrix.empty(table, rows.vectors.shape[1], seen, len(rows.ids))
        matrix.put(rows)
        return matrix
    rows = read_chunks(table, execute, "c.partition00 = %s", [agent_id], vectors=False)
    if len(rows.ids) < index_ann.ANN_MIN_ROWS:
        return None
    matrix = Matrix.empty(table, vector_bytes // 4 // slots, seen, len(rows.ids))
    matrix.vectors = np.zeros((0, matrix.dimension), dtype=np.float32)
    matrix.mapped = True
    matrix._place(rows)
    return matrix if matrix.nbytes <= _limit() else None


def _evict() -> None:
    """Drop the least recently used matrices until the cache fits its bound (the newest one
    fits on its own: _build checked)."""
    limit = _limit()
    total = sum(m.nbytes for m in _CACHE.matrices.values())
    while total > limit and len(_CACHE.matrices) > 1:
        _, dropped = _CACHE.matrices.popitem(last=False)
        total -= dropped.nbytes
