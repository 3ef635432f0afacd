"""`make bench`: KNN latency of orca's vector layout beside the layouts it was chosen over.

Builds throwaway databases in a temporary folder (never the user's), fills each layout with the
same random unit vectors spread over several agents, and times k=10 queries for one agent.
A numpy scan of that agent's vectors in the same run gives the practical floor. Every figure is
the median of several runs: runs of the queries, and batches of the fill.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from bench import knn_postgres
from bench.measure import median_and_range, percentile
from bench.vectors import DISTRIBUTIONS, unit_vectors
from memory import index, index_numpy, index_sqlite
from orca_memory.core.db.base import Driver, load_sqlite_vec

K = 10
SESSIONS_PER_AGENT = 20
ROWS_PER_SESSION_BLOCK = 1000  # ids 1-999 are session 0 of every agent, 1000-1999 session 1...
QUERY_AGENT = 0  # exists whatever --agents says
INSERT_RUNS = 10  # the fill goes in this many transactions; each one's rate is one run


@dataclass(frozen=True)
class Layout:
    label: str
    ddl: str
    insert: str
    row: Callable[[int, int, bytes], tuple[Any, ...]]  # (row id, agent, vector) -> parameters
    knn: str
    scope: tuple[Any, ...]  # parameters after the vector and k


def _layouts(dimension: int) -> list[Layout]:
    orca = index.MESSAGE_VECTORS
    orca_ddl = index_sqlite.vector_table_sql(orca, dimension)
    orca_insert = (
        f"INSERT INTO {orca.name} (msg_id, agent_id, session_id, role, msg_type, created_at, "
        "embedding) VALUES (?, ?, ?, 'user', 'normal', ?, ?)"
    )

    def orca_row(i: int, agent: int, blob: bytes) -> tuple[Any, ...]:
        session = (i // ROWS_PER_SESSION_BLOCK) % SESSIONS_PER_AGENT
        return i, f"agent-{agent}", f"session-{agent}-{session}", i, blob

    orca_knn = f"SELECT msg_id, distance FROM {orca.name} WHERE embedding MATCH ? AND k = ?"
    plain = f"embedding FLOAT[{dimension}] distance_metric=cosine"
    agent = f"agent-{QUERY_AGENT}"
    return [
        Layout(
            "partition key agent_id (orca)",
            orca_ddl,
            orca_insert,
            orca_row,
            f"{orca_knn} AND agent_id = ?",
            (agent,),
        ),
        Layout(
            "partition key agent_id + session_id filter (orca)",
            orca_ddl,
            orca_insert,
            orca_row,
            f"{orca_knn} AND agent_id = ? AND session_id = ?",
            (agent, f"session-{QUERY_AGENT}-0"),
        ),
        Layout(
            "metadata column agent_id",
            "CREATE VIRTUAL TABLE v USING vec0("
            f"msg_id INTEGER PRIMARY KEY, agent_id TEXT, {plain})",
            "INSERT INTO v (msg_id, agent_id, embedding) VALUES (?, ?, ?)",
            lambda i, a, blob: (i, f"agent-{a}", blob),
            "SELECT msg_id, distance FROM v WHERE embedding MATCH ? AND k = ? AND agent_id = ?",
            (agent,),
        ),
        Layout(
            "no scope (all agents' vectors)",
            f"CREATE VIRTUAL TABLE v USING vec0(msg_id INTEGER PRIMARY KEY, {plain})",
            "INSERT INTO v (msg_id, embedding) VALUES (?, ?)",
            lambda i, a, blob: (i, blob),
            "SELECT msg_id, distance FROM v WHERE embedding MATCH ? AND k = ?",
            (),
        ),
    ]


def _time(search: Callable[[np.ndarray], object], queries: np.ndarray) -> list[float]:
    timings = []
    for query in queries:
        start = time.perf_counter()
        search(query)
        timings.append(time.perf_counter() - start)
    return timings


@dataclass
class Figures:
    """One row of the table: per-run medians and p95s (ms) and the fill's batch rates."""

    label: str
    medians: list[float] = field(default_factory=list)
    p95s: list[float] = field(default_factory=list)
    insert_rates: list[float] = field(default_factory=list)

    def add_run(self, timings: list[float]) -> None:
        self.medians.append(statistics.median(timings) * 1000)
        self.p95s.append(percentile(timings, 0.95) * 1000)


class Command(BaseCommand):
    help = "Measure vec0 KNN latency for orca's layout and the alternatives (temporary databases)."

    def add_arguments(self, parser: CommandParser) -> None:
        # Defaults depend on the engine: SQLite's scan is timed at two sizes and dimensions,
        # PostgreSQL's HNSW index at the size of issue 17 with recall against exact.
        parser.add_argument("--sizes", type=int, nargs="+", help="10,000 100,000 | 100,000")
        parser.add_argument("--dims", type=int, nargs="+", help="1024 384 | 1024")
        parser.add_argument("--agents", type=int, nargs="+", default=[10, 1])
        parser.add_argument("--queries", type=int, help="per run: 30 | 100")
        parser.add_argument("--runs", type=int, default=5, help="runs of the queries per row")
        parser.add_argument(
            "--distributions",
            nargs="+",
            choices=list(DISTRIBUTIONS),
            default=list(DISTRIBUTIONS),
            help="PostgreSQL only: random unit vectors and/or a Gaussian mixture",
        )
        parser.add_argument(
            "--storage",
            choices=["plain", "main", "external", "extended"],
            help="PostgreSQL only: the embedding column's storage, instead of the layout's",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if connections["default"].vendor == "postgresql":
            self._handle_postgres(options)
            return
        options = {"sizes": [10_000, 100_000], "dims": [1024, 384], "queries": 30} | {
            name: value for name, value in options.items() if value is not None
        }
        rng = np.random.default_rng(7)
        self.stdout.write(
            f"k={K}, {options['runs']} runs of {options['queries']} queries per row, "
            f"sqlite-vec via {Driver.__name__}; median of the runs (lowest-highest run)\n"
        )
        self.stdout.write(
            "| vectors | agents | dims | layout | insert vec/s | KNN median ms | p95 ms | x numpy |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|---|")
        for agents in options["agents"]:
            for dimension in options["dims"]:
                for size in options["sizes"]:
                    vectors = unit_vectors(rng, size, dimension)
                    queries = unit_vectors(rng, options["queries"], dimension)
                    self._bench_size(vectors, queries, agents, options["runs"])

    def _handle_postgres(self, options: dict[str, Any]) -> None:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('server_version'), "
                "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector')"
            )
            server, pgvector = cursor.fetchone()
        queries = options["queries"] or 100
        self.stdout.write(
            f"PostgreSQL {server}, pgvector {pgvector}; k={K}, {options['runs']} runs of "
            f"{queries} queries through memory.index.knn; p50: median of the runs (lowest-"
            "highest run), p95: median of the runs' p95; recall@10 against exact (numpy), "
            "mean and worst query"
        )
        self.stdout.write(
            "| vectors | agents | distribution | scoping | plan | p50 ms | p95 ms | "
            "recall@10 | worst |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|---|---|")
        rng = np.random.default_rng(7)
        for distribution in options["distributions"]:
            make = DISTRIBUTIONS[distribution]
            for dimension in options["dims"] or [1024]:
                for size in options["sizes"] or [100_000]:
                    vectors, queries_ = make(rng, size, dimension), make(rng, queries, dimension)
                    for agents in options["agents"]:
                        data = knn_postgres.DataSet(
                            vectors, queries_, agents, distribution, options["storage"]
                        )
                        knn_postgres.bench(data, options["runs"], self.stdout.write)

    def _bench_size(self, vectors: np.ndarray, queries: np.ndarray, agents: int, runs: int) -> None:
        size, dimension = vectors.shape
        agent_of = np.arange(size) % agents
        own = vectors[agent_of == QUERY_AGENT]
        layouts = _layouts(dimension)
        rows = {layout.label: Figures(layout.label) for layout in layouts}
        numpy_row = Figures(f"numpy scan of the agent's {len(own):,} vectors")
        derived_rows = [
            Figures("derived index (index_numpy, the service's KNN)"),
            Figures("derived index + session_id filter"),
        ]
        with tempfile.TemporaryDirectory(prefix="orca-bench-") as folder:
            # Layouts with the same DDL share one database, filled once.
            filled: dict[str, tuple[Any, list[float]]] = {}
            for layout in layouts:
                if layout.ddl not in filled:
                    conn = self._connect(Path(folder) / f"{len(filled)}.db")
                    filled[layout.ddl] = (conn, self._fill(conn, layout, vectors, agent_of))
                rows[layout.label].insert_rates = filled[layout.ddl][1]
            derived = self._derived(filled[layouts[0].ddl][0])
            # Runs interleave the layouts, so a slow moment of the machine hits them all alike.
            for _ in range(runs):
                for layout in layouts:
                    conn = filled[layout.ddl][0]
                    knn = self._knn(conn, layout)
                    rows[layout.label].add_run(_time(knn, queries))
                numpy_row.add_run(_time(lambda q: np.argpartition(-(own @ q), K)[:K], queries))
                for row, search in zip(derived_rows, derived, strict=True):
                    row.add_run(_time(search, queries))
            for conn, _ in filled.values():
                conn.close()
        floor = statistics.median(numpy_row.medians)
        for row in [*rows.values(), *derived_rows, numpy_row]:
            ratio = statistics.median(row.medians) / floor
            inserts = median_and_range(row.insert_rates, 0) if row.insert_rates else "-"
            self.stdout.write(
                f"| {size:,} | {agents} | {dimension} | {row.label} | {inserts} | "
                f"{median_and_range(row.medians)} | {statistics.median(row.p95s):.2f} | "
                f"{ratio:.1f} |"
            )

    def _derived(self, conn: Any) -> list[Callable[[np.ndarray], object]]:
        """KNN as the service answers it: the query agent's matrix, read from the orca
        layout's vec0 table, after the change log lookup each query makes."""
        table = index.MESSAGE_VECTORS
        start = time.perf_counter()
        rows = index_numpy.read_chunks(
            table,
            lambda sql, params: conn.execute(sql.replace("%s", "?"), params).fetchall(),
            "c.partition00 = %s",
            [f"agent-{QUERY_AGENT}"],
        )
        matrix = index_numpy.Matrix.empty(table, rows.vectors.shape[1], 0, len(rows.ids))
        matrix.put(rows)
        self.stderr.write(
            f"derived index: {len(rows.ids):,} vectors read and built in "
            f"{time.perf_counter() - start:.2f} s, {matrix.nbytes / 2**20:.0f} MiB"
        )
        conn.execute(f"CREATE TABLE IF NOT EXISTS {index_numpy.CHANGES} (id INTEGER PRIMARY KEY)")
        session = index.Filter("session_id", "=", f"session-{QUERY_AGENT}-0")

        def search(query: np.ndarray, filters: tuple[index.Filter, ...]) -> object:
            conn.execute(index_numpy.LOG_BOUNDS).fetchone()
            hits = matrix.knn(index_numpy.unit(query.astype(np.float32)), K, filters)
            assert len(hits) == K
            return hits

        return [lambda q: search(q, ()), lambda q: search(q, (session,))]

    def _knn(self, conn: Any, layout: Layout) -> Callable[[np.ndarray], object]:
        def search(query: np.ndarray) -> object:
            params = (array("f", query).tobytes(), K, *layout.scope)
            rows = conn.execute(layout.knn, params).fetchall()
            assert len(rows) == K
            return rows

        return search

    def _connect(self, path: Path) -> Any:
        conn = Driver.connect(str(path), isolation_level=None)
        conn.executescript(settings.SQLITE_INIT_COMMAND)  # the service's pragmas
        support = load_sqlite_vec(conn)
        if not support.enabled:
            raise SystemExit(f"sqlite-vec is not available: {support.reason}")
        return conn

    def _fill(
        self, conn: Any, layout: Layout, vectors: np.ndarray, agent_of: np.ndarray
    ) -> list[float]:
        """Insert the vectors in batches of one transaction each; returns each batch's rate."""
        conn.execute(layout.ddl)
        rates = []
        per_batch = max(1, len(vectors) // INSERT_RUNS)
        for first in range(0, len(vectors), per_batch):
            batch = vectors[first : first + per_batch]
            start = time.perf_counter()
            conn.execute("BEGIN")
            conn.executemany(
                layout.insert,
                (
                    layout.row(first + i + 1, int(agent_of[first + i]), array("f", v).tobytes())
                    for i, v in enumerate(batch)
                ),
            )
            conn.execute("COMMIT")
            rates.append(len(batch) / (time.perf_counter() - start))
        return rates
