"""`make bench`: KNN latency of orca's vector layout beside the layouts it was chosen over.

Builds throwaway databases in a temporary folder (never the user's), fills each layout with the
same random unit vectors spread over several agents, and times k=10 queries for one agent.
A numpy scan of that agent's vectors in the same run gives the practical floor.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandParser

from memory import index
from orca_memory.db.base import MMAP_SIZE, Driver, load_sqlite_vec

K = 10
SESSIONS_PER_AGENT = 20
ROWS_PER_SESSION_BLOCK = 1000  # ids 1-999 are session 0 of every agent, 1000-1999 session 1...
QUERY_AGENT = 0  # exists whatever --agents says


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
    orca_ddl = index.vector_table_sql(orca, dimension)
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


def _unit_vectors(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dimension), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


class Command(BaseCommand):
    help = "Measure vec0 KNN latency for orca's layout and the alternatives (temporary databases)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
        parser.add_argument("--dims", type=int, nargs="+", default=[1024, 384])
        parser.add_argument("--agents", type=int, nargs="+", default=[10, 1])
        parser.add_argument("--queries", type=int, default=30)

    def handle(self, *args: Any, **options: Any) -> None:
        rng = np.random.default_rng(7)
        self.stdout.write(
            f"k={K}, {options['queries']} queries per row, sqlite-vec via {Driver.__name__}\n"
        )
        self.stdout.write(
            "| vectors | agents | dims | layout | insert vec/s | KNN ms (median) | p95 ms |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|")
        for agents in options["agents"]:
            for dimension in options["dims"]:
                for size in options["sizes"]:
                    vectors = _unit_vectors(rng, size, dimension)
                    queries = _unit_vectors(rng, options["queries"], dimension)
                    self._bench_size(vectors, queries, agents)

    def _bench_size(self, vectors: np.ndarray, queries: np.ndarray, agents: int) -> None:
        size, dimension = vectors.shape
        agent_of = np.arange(size) % agents
        insert_rate: dict[str, float] = {}
        with tempfile.TemporaryDirectory(prefix="orca-bench-") as folder:
            for layout in _layouts(dimension):
                # Layouts with the same DDL share one database, filled once.
                path = Path(folder) / f"{len(insert_rate)}.db"
                if layout.ddl not in insert_rate:
                    conn = self._connect(path)
                    insert_rate[layout.ddl] = self._fill(conn, layout, vectors, agent_of)
                timings = []
                for query in queries:
                    params = (array("f", query).tobytes(), K, *layout.scope)
                    start = time.perf_counter()
                    rows = conn.execute(layout.knn, params).fetchall()
                    timings.append(time.perf_counter() - start)
                    assert len(rows) == K
                p95 = sorted(timings)[int(0.95 * (len(timings) - 1))] * 1000
                self.stdout.write(
                    f"| {size:,} | {agents} | {dimension} | {layout.label} | "
                    f"{insert_rate[layout.ddl]:,.0f} | "
                    f"{_median_ms(timings):.2f} | {p95:.2f} |"
                )
            conn.close()
        own = vectors[agent_of == QUERY_AGENT]
        timings = []
        for query in queries:
            start = time.perf_counter()
            np.argpartition(-(own @ query), K)[:K]
            timings.append(time.perf_counter() - start)
        self.stdout.write(
            f"| {size:,} | {agents} | {dimension} | numpy scan of the agent's {len(own):,} "
            f"vectors | - | {_median_ms(timings):.2f} | - |"
        )

    def _connect(self, path: Path) -> Any:
        conn = Driver.connect(str(path), isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")
        support = load_sqlite_vec(conn)
        if not support.enabled:
            raise SystemExit(f"sqlite-vec is not available: {support.reason}")
        return conn

    def _fill(self, conn: Any, layout: Layout, vectors: np.ndarray, agent_of: np.ndarray) -> float:
        conn.execute(layout.ddl)
        start = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany(
            layout.insert,
            (
                layout.row(i + 1, int(agent_of[i]), array("f", vector).tobytes())
                for i, vector in enumerate(vectors)
            ),
        )
        conn.execute("COMMIT")
        return len(vectors) / (time.perf_counter() - start)
