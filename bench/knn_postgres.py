"""`bench_knn` on PostgreSQL: the service's HNSW layout and the agent-scoping alternatives.

Each data set goes into its own throwaway database on the configured server, in the real
layout (memory.index_postgres.vector_table_sql): the table and its B-tree first, the vectors
by COPY, then the HNSW index, whose build is timed (building after the fill is pgvector's
fast path; the service itself grows the index row by row). Queries go through `memory.index.knn`,
the service's own code path, for one agent; recall@10 is measured against an exact numpy
search of that agent's vectors.
"""

from __future__ import annotations

import statistics
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.db import connections, transaction

from bench.measure import median_and_range, percentile
from bench.tempdb import drop_database, use_temporary_database
from memory import index, index_postgres
from memory.index_schema import VectorTable

K = 10
TABLE = index.MESSAGE_VECTORS
HNSW = f"{TABLE.name}_hnsw"
BTREE = f"{TABLE.name}_agent"
QUERY_AGENT = "agent-0"
EF_SEARCHES = (40, 100, 200)


def build_memory(vectors: int, dimension: int) -> str:
    """`maintenance_work_mem` for an HNSW build of that many vectors.

    pgvector builds the graph in memory when it fits; the default 64 MB makes a 100k x 1024
    build spill and take several times longer (pgvector's README). The built index took
    781 MB per 100k x 1024 vectors here (~2 bytes a dimension a vector, m 16): twice that,
    at least 2 GB. A server would set it for the session of a REINDEX the same way.
    """
    gigabytes = max(2, -(-4 * vectors * dimension // 2**30))
    return f"{gigabytes}GB"


@dataclass
class Figures:
    """One row: per-run p50s and p95s (ms), and every query's recall@10."""

    label: str
    plan: str = ""
    p50s: list[float] = field(default_factory=list)
    p95s: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class DataSet:
    vectors: np.ndarray
    queries: np.ndarray
    agents: int
    distribution: str
    storage: str | None = None  # the embedding column's, when not the layout's own

    def exact(self) -> list[set[int]]:
        """The true k nearest ids of the query agent for each query (numpy, cosine)."""
        ids = np.arange(1, len(self.vectors) + 1)[self._own]
        own = self.vectors[self._own]
        return [set(ids[np.argsort(-(own @ q))[:K]].tolist()) for q in self.queries]

    @property
    def _own(self) -> np.ndarray:
        return np.arange(len(self.vectors)) % self.agents == 0

    def agent(self, i: int) -> str:
        return f"agent-{i % self.agents}"


def bench(data: DataSet, runs: int, write: Callable[[str], None]) -> None:
    """Fill a throwaway database with `data`, time each scoping variant, write the rows."""
    size, dimension = data.vectors.shape
    with tempfile.TemporaryDirectory(prefix="orca-bench-") as folder:
        use_temporary_database(Path(folder) / f"knn_{data.distribution}_{data.agents}")
        # Before the build, whose memory then is the server's: 1M x 1024 vectors are 4 GB here.
        exact = data.exact()
        copy_rate = _fill(data)
        memory = build_memory(size, dimension)
        build = _timed(lambda: _execute(f"SET maintenance_work_mem = '{memory}'", _hnsw()))
        write(
            f"\n{size:,} x {dimension} {data.distribution} vectors, {data.agents} agent(s), "
            f"storage {_storage()} "
            f"({size // data.agents:,} vectors for the queried agent): COPY {copy_rate:,.0f} "
            f"vectors/s, HNSW build {build:.1f} s (maintenance_work_mem {memory}); {_sizes()}"
        )
        rows = _variants(data, exact, runs)
        # Now rather than at exit: each data set's database takes 1.3-1.6 GB.
        drop_database(connections["default"].settings_dict["NAME"])
    for row in rows:
        write(
            f"| {size:,} | {data.agents} | {data.distribution} | {row.label} | {row.plan} | "
            f"{median_and_range(row.p50s)} | {statistics.median(row.p95s):.2f} | "
            f"{statistics.mean(row.recalls):.3f} | {min(row.recalls):.1f} |"
        )


def _hnsw(where: str = "", name: str = HNSW) -> str:
    """The service's HNSW statement (vector_table_sql), optionally as a partial index."""
    statement = _layout(1)[1]
    statement = statement.replace(f'"{HNSW}"', f'"{name}"')
    return f"{statement} WHERE {where}" if where else statement


def _variants(data: DataSet, exact: list[set[int]], runs: int) -> list[Figures]:
    """Today's layout as the planner uses it, then each way of scoping on its own: the
    indexes a variant must not use are dropped for it (the planner picks the B-tree and an
    exact sort for a 10% agent, whatever ef_search would give)."""
    rows = _at_each_ef(data, exact, runs, "today's layout (planner's choice)")
    if data.agents > 1:
        with _dropped(BTREE, index_only=True):
            rows += _at_each_ef(data, exact, runs, "HNSW + iterative scan")
    with _dropped(HNSW):
        rows.append(_repeat(data, exact, runs, "no HNSW: B-tree on agent_id + exact sort"))
    if data.agents > 1:
        with _dropped(HNSW, BTREE, index_only=True):
            seconds = _timed(
                lambda: _execute(
                    f"SET maintenance_work_mem = '{build_memory(*data.vectors.shape)}'",
                    _hnsw(f"agent_id = '{QUERY_AGENT}'", f"{HNSW}_{QUERY_AGENT}"),
                )
            )
            label = f"partial HNSW per agent, ef_search 100 (built in {seconds:.1f} s)"
            rows.append(_repeat(data, exact, runs, label))
    return rows


def _at_each_ef(data: DataSet, exact: list[set[int]], runs: int, label: str) -> list[Figures]:
    """One row per ef_search, the runs interleaved so that a slow moment hits them alike."""
    rows = {ef: Figures(f"{label}, ef_search {ef}") for ef in EF_SEARCHES}
    kept = index_postgres.EF_SEARCH
    try:
        for _ in range(runs):
            for ef, row in rows.items():
                index_postgres.EF_SEARCH = ef  # what index.knn sets for k=10
                _measure(data, exact, row)
    finally:
        index_postgres.EF_SEARCH = kept
    return list(rows.values())


def _repeat(data: DataSet, exact: list[set[int]], runs: int, label: str) -> Figures:
    row = Figures(label)
    for _ in range(runs):
        _measure(data, exact, row)
    return row


@contextmanager
def _dropped(*indexes: str, index_only: bool = False) -> Iterator[None]:
    """The indexes dropped for the block, then restored (a rolled-back transaction);
    `index_only`: no sequential scan either, or the planner sorts the agent's rows exactly."""
    with transaction.atomic():
        _execute(*(f'DROP INDEX "{name}"' for name in indexes))
        if index_only:
            _execute("SET LOCAL enable_seqscan = off")
        yield
        transaction.set_rollback(True)


def _measure(data: DataSet, exact: list[set[int]], row: Figures) -> None:
    """One run of the queries through index.knn; the first run also records the plan."""
    if not row.plan:
        row.plan = _plan(data.queries[0])
    timings = []
    for query, truth in zip(data.queries, exact, strict=True):
        vector = query.tolist()
        start = time.perf_counter()
        hits = index.knn(TABLE, agent_id=QUERY_AGENT, embedding=vector, k=K)
        timings.append(time.perf_counter() - start)
        if len(row.recalls) < len(data.queries):  # the first run's; later runs are alike
            row.recalls.append(len(truth & {hit.id for hit in hits}) / K)
    row.p50s.append(statistics.median(timings) * 1000)
    row.p95s.append(percentile(timings, 0.95) * 1000)


def _plan(query: np.ndarray) -> str:
    """The index the planner chose for index.knn's statement (its EXPLAIN, condensed)."""
    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, params))
        return execute(sql, params, many, context)

    connection = connections["default"]
    with connection.execute_wrapper(capture):
        index.knn(TABLE, agent_id=QUERY_AGENT, embedding=query.tolist(), k=K)
    sql, params = captured[-1]
    set_ef_search, select = sql.split("; ", 1)  # index.knn's SET, then its query
    with connection.cursor() as cursor:
        cursor.execute(f"{set_ef_search}; EXPLAIN {select}", params)
        cursor.nextset()
        lines = [line for (line,) in cursor.fetchall()]
    for line in lines:
        if "Index Scan using" in line:
            return line.split("Index Scan using")[1].split()[0]
        if "Bitmap Index Scan on" in line:
            return "bitmap " + line.split("Bitmap Index Scan on")[1].split()[0] + " + sort"
    return "seq scan + sort"


@contextmanager
def hnsw_built_after(dimension: int) -> Iterator[None]:
    """Every vector table's HNSW index dropped for the block (a fill), built after it.

    Growing the index row by row, as the service does, took 110k vectors of 1024 dimensions
    at ~110 rows/s here; a build after the fill is pgvector's fast path.
    """
    builds = []
    for table in index.VECTOR_TABLES:
        builds.append(_layout(dimension, table)[1])
        _execute(f'DROP INDEX "{table.name}_hnsw"')
    yield
    with connections["default"].cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{TABLE.name}"')
        (vectors,) = cursor.fetchone()
    _execute(f"SET maintenance_work_mem = '{build_memory(vectors, dimension)}'", *builds)
    _execute(*(f'ANALYZE "{table.name}"' for table in index.VECTOR_TABLES))


def _layout(dimension: int, table: VectorTable = TABLE) -> tuple[list[str], str]:
    """vector_table_sql's statements: those before the fill, and the HNSW index's."""
    statements = index_postgres.vector_table_sql(table, dimension)
    (hnsw,) = [statement for statement in statements if "USING hnsw" in statement]
    return [statement for statement in statements if statement != hnsw], hnsw


def _fill(data: DataSet) -> float:
    """The table and its B-tree (the real layout), the vectors by COPY; returns vectors/s."""
    index.drop_vector_tables()
    _execute(*_layout(data.vectors.shape[1])[0])
    if data.storage:
        _execute(f"ALTER TABLE {TABLE.name} ALTER COLUMN embedding SET STORAGE {data.storage}")
    columns = ", ".join([TABLE.key, "agent_id", *TABLE.metadata, "embedding"])
    raw = connections["default"].connection
    start = time.perf_counter()
    with raw.cursor() as cursor:
        statement = f"COPY {TABLE.name} ({columns}) FROM STDIN WITH (FORMAT binary)"
        with cursor.copy(statement) as copy:
            copy.write(COPY_HEADER)
            for i, vector in enumerate(data.vectors):
                agent = data.agent(i)
                copy.write(_copy_row(i + 1, agent, f"session-{agent}-{i % 20}", vector))
            copy.write(COPY_TRAILER)
    rate = len(data.vectors) / (time.perf_counter() - start)
    _execute(f"ANALYZE {TABLE.name}")
    return rate


# COPY's binary format: the text form of 1,024 floats is ~20 kB a row and ran at under
# 1,000 rows/s here, half of it formatting in Python.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)


def _copy_row(row_id: int, agent: str, session: str, vector: np.ndarray) -> bytes:
    """msg_id, agent_id, session_id, role, msg_type, created_at, embedding (pgvector's
    binary form: dimension, a reserved int16, big-endian float4s)."""

    def text(value: str) -> bytes:
        encoded = value.encode()
        return struct.pack(">i", len(encoded)) + encoded

    dimension = len(vector)
    return b"".join(
        [
            struct.pack(">hiq", 7, 8, row_id),
            text(agent),
            text(session),
            text("user"),
            text("normal"),
            struct.pack(">iq", 8, row_id),
            struct.pack(">ihh", 4 + 4 * dimension, dimension, 0),
            vector.astype(">f4").tobytes(),
        ]
    )


def _sizes() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_pretty(pg_total_relation_size(%s)), "
            "pg_size_pretty(pg_relation_size(%s))",
            [TABLE.name, HNSW],
        )
        table, hnsw = cursor.fetchone()
    return f"table with its indexes {table}, of which HNSW {hnsw}"


def _storage() -> str:
    """The embedding column's storage: EXTERNAL (pgvector's default) puts a vector of more
    than ~500 dimensions out of line, in the TOAST table."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attname = 'embedding'",
            [TABLE.name],
        )
        (code,) = cursor.fetchone()
    return {"p": "PLAIN", "e": "EXTERNAL", "m": "MAIN", "x": "EXTENDED"}[code]


def _execute(*statements: str) -> None:
    with connections["default"].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start
