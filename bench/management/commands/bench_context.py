"""`make bench`: context_build latency in a large store, in a temporary database.

The store: 100,000 messages (50 sessions of 2,000), 10 summaries per session and 10,000
long-term memories, all embedded, shared by 10 agents (sessions and memories dealt out in
turn), then by one. Each run asks for the context of one session with a new query, so the
recall layer searches the agent's messages by text and by vector. The query's embedding is
excluded, as a remote call would be: the benchmark's embedder returns synthetic unit vectors at
no cost, clustered by default (bench.vectors: near neighbours, as real embeddings have; random
ones are an approximate index's worst case), or uniformly random. On PostgreSQL
(ORCA_DATABASE_URL) the HNSW indexes are built after the fill.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections, transaction
from tqdm import tqdm

from bench import knn_postgres
from bench.measure import median_and_range, percentile
from bench.tempdb import point_at, use_temporary_database
from bench.vectors import DISTRIBUTIONS
from memory import index, index_numpy, index_text
from memory.context import context_build
from memory.embeddings import DEFAULT_THRESHOLDS, Signature
from memory.models import LongTermMemory, MainMessage, MemoryType, ShortTermMemory
from memory.tokens import estimate_tokens
from memory.vectors import embed_pending, prepare_index, query_vector

AGENT = "bench-agent"
RECALL_K = 10  # --recall's k
RECALL_SEED = 29  # --recall's query words
START = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [
    "tea",
    "coffee",
    "deploy",
    "server",
    "friday",
    "meeting",
    "budget",
    "project",
    "release",
    "database",
    "index",
    "vector",
    "query",
    "travel",
    "family",
    "music",
    "hiking",
    "painting",
    "记忆",
    "偏好",
    "项目",
    "部署",
    "会议",
    "预算",
    "周末",
    "咖啡",
    "绿茶",
    "旅行",
]


class FakeEmbedder:
    """A stand-in provider for the benchmark: unit vectors of one of bench.vectors'
    distributions (texts and queries alike), computed at no cost."""

    def __init__(self, dimension: int, distribution: str) -> None:
        self.signature = Signature("bench", distribution, dimension)
        self.thresholds = DEFAULT_THRESHOLDS
        self.batch_size = 500
        self._rng = np.random.default_rng(1)
        self._make = DISTRIBUTIONS[distribution]

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        return self._make(self._rng, len(texts), self.signature.dimension).tolist()


# A Zipf-distributed vocabulary (exponent 1.1, as in natural text) of the words above and
# 20,000 made-up ones: with 28 words alone, every query word would match most messages and
# the lexical side of recall would measure an index no real conversation builds.
VOCABULARY = WORDS + [f"word{i}" for i in range(20_000)]
CUMULATIVE_WEIGHTS = list(
    itertools.accumulate(1 / rank**1.1 for rank in range(1, len(VOCABULARY) + 1))
)


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, cum_weights=CUMULATIVE_WEIGHTS, k=words))


def _agent(number: int, agents: int, *, of: int = 0, largest: float = 0.0) -> str:
    """The agent holding session or memory `number` of `of`: dealt out in turn, or with
    `largest`, that share of them (the first) held by one agent, the rest dealt to the others."""
    held = round(of * largest)
    if not held or agents == 1:
        return f"{AGENT}-{number % agents}"
    if number < held:
        return f"{AGENT}-0"
    return f"{AGENT}-{1 + (number - held) % (agents - 1)}"


MODELS = (MainMessage, ShortTermMemory, LongTermMemory)
# What a statement reads, by the first of these tables it names: the index's tables first
# (their statements join the models' tables too).
STATEMENT_KINDS = [
    *((table.name, f"vector {table.name}") for table in index.VECTOR_TABLES),
    *((table.name, f"lexical {table.name}") for table in index.LEXICAL_TABLES),
    *((model._meta.db_table, f"ORM {model._meta.db_table}") for model in MODELS),
]


class StatementTimes:
    """A connection's execute wrapper that sums each statement's time by what it reads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.calls: list[float] = []  # each context call's whole time

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            kind = next((kind for name, kind in STATEMENT_KINDS if name in sql), "other SQL")
            self.seconds[kind] += time.perf_counter() - start
            self.counts[kind] += 1

    def report(self) -> str:
        """A line per kind, the costliest first: mean ms and statements per context call."""
        calls = len(self.calls)
        lines = [f"  a context call, mean of {calls}: {sum(self.calls) / calls * 1000:.1f} ms"]
        for kind, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            lines.append(
                f"  - {kind}: {seconds / calls * 1000:.1f} ms in "
                f"{self.counts[kind] / calls:.1f} statements"
            )
        rest = sum(self.calls) - sum(self.seconds.values())
        lines.append(f"  - outside SQL (Python): {rest / calls * 1000:.1f} ms")
        return "\n".join(lines)


@contextmanager
def _vector_cache_off() -> Iterator[None]:
    """KNN answered by vec0 alone, as with ORCA_VECTOR_CACHE_MB=0."""
    configured = settings.ORCA
    settings.ORCA = dataclasses.replace(configured, vector_cache_mb=0)
    try:
        yield
    finally:
        settings.ORCA = configured


class Command(BaseCommand):
    help = "Measure context_build p50/p95 in a large synthetic store (temporary database)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sessions", type=int, default=50)
        parser.add_argument("--messages-per-session", type=int, default=2000)
        parser.add_argument("--memories", type=int, default=10_000)
        parser.add_argument(
            "--agents", type=int, nargs="+", default=[10, 1], help="agents sharing the store"
        )
        parser.add_argument("--dims", type=int, nargs="+", default=[1024, 384])
        parser.add_argument(
            "--vectors",
            choices=list(DISTRIBUTIONS),
            default="clustered",
            help="the embeddings: around cluster centres, as real ones are, or uniformly random",
        )
        parser.add_argument(
            "--largest",
            type=float,
            default=0.0,
            help="the share of sessions and memories one agent holds (the rest dealt to the "
            "others), whose sessions the queries then ask about (issue 35's 1M store: 0.1)",
        )
        parser.add_argument("--queries", type=int, default=200, help="per run")
        parser.add_argument("--runs", type=int, default=5, help="runs of the queries per store")
        parser.add_argument(
            "--store",
            type=Path,
            help="a folder keeping each row's store (SQLite; on PostgreSQL a database on the "
            "server named after the store, the folder unused): built when missing, else reused, "
            "so that two versions of the code can be timed on the same store",
        )
        parser.add_argument(
            "--recall",
            type=int,
            default=0,
            metavar="N",
            help="also the derived index's recall@10 against vec0's exact scan, for N queries "
            "of the agent the runs ask about (SQLite)",
        )
        parser.add_argument(
            "--split",
            action="store_true",
            help="also write where a call's time goes: its SQL statements by what they read",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(
            f"{options['runs']} runs of {options['queries']} queries per row; "
            "median of the runs (lowest-highest run)\n"
        )
        sqlite = connections["default"].vendor == "sqlite"
        self.stdout.write(
            "| messages | memories | agents | dims | KNN by | context_build p50 ms | p95 ms |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|")
        rng = random.Random(11)
        for agents in options["agents"]:
            for dimension in options["dims"]:
                split = StatementTimes() if options["split"] else None
                rows = self._row(options, agents, dimension, rng, split, compare=sqlite)
                total = options["sessions"] * options["messages_per_session"]
                for knn_by, (p50s, p95s) in rows.items():
                    self.stdout.write(
                        f"| {total:,} | {options['memories']:,} | {agents} | {dimension} | "
                        f"{knn_by} | {median_and_range(p50s)} | {median_and_range(p95s)} |"
                    )
                if split:
                    self.stdout.write(split.report())

    def _row(
        self,
        options: dict[str, Any],
        agents: int,
        dimension: int,
        rng: random.Random,
        split: StatementTimes | None,
        *,
        compare: bool,
    ) -> dict[str, tuple[list[float], list[float]]]:
        """p50s and p95s per run, by what answered KNN: on SQLite the derived index and, in
        runs interleaved with its own so that the machine's slow moments hit both alike, vec0
        alone (ORCA_VECTOR_CACHE_MB=0); on PostgreSQL its HNSW index."""
        engine = "derived index" if compare else "HNSW"
        rows: dict[str, tuple[list[float], list[float]]] = {engine: ([], [])}
        if compare:
            rows["vec0"] = ([], [])
        with tempfile.TemporaryDirectory(prefix="orca-bench-") as folder:
            embedder = FakeEmbedder(dimension, options["vectors"])
            self._open_store(options, agents, embedder, Path(folder))
            self._warm(options, agents, embedder)
            if compare and options["recall"]:
                self.stderr.write(self._recall(options, agents, dimension))
            for _ in range(options["runs"]):
                for knn_by, (p50s, p95s) in rows.items():
                    wrapper = split if split and knn_by == engine else None
                    with (
                        connections["default"].execute_wrapper(wrapper)
                        if wrapper
                        else nullcontext(),
                        _vector_cache_off() if knn_by == "vec0" else nullcontext(),
                    ):
                        timings = self._measure(options, agents, embedder, rng)
                    if wrapper:
                        wrapper.calls += timings
                    p50s.append(statistics.median(timings) * 1000)
                    p95s.append(percentile(timings, 0.95) * 1000)
            connections["default"].close()
        return rows

    def _open_store(
        self, options: dict[str, Any], agents: int, embedder: FakeEmbedder, folder: Path
    ) -> None:
        """The row's store: a new one in `folder`, or the one kept in --store (built there
        when missing)."""
        kept: Path | None = options["store"]
        if kept is None:
            use_temporary_database(folder / "bench.db")
            self._fill(options, agents, embedder)
            return
        shape = (
            f"{options['sessions']}x{options['messages_per_session']}-"
            f"{options['memories']}-{agents}a-{embedder.signature.dimension}d"
        )
        if options["vectors"] != "random":  # the stores kept before there was a choice
            shape += f"-{options['vectors']}"
        if options["largest"]:
            shape += f"-top{round(options['largest'] * 100)}"
        if connections["default"].vendor == "postgresql":
            self._open_kept_database(options, agents, embedder, f"bench_context_{shape}")
            return
        path = kept / f"context-{shape}.db"
        if path.exists():
            point_at(path)
            # A store kept by an older version gets the tables added since (its data stays).
            call_command("migrate", verbosity=0, interactive=False)
            return
        kept.mkdir(parents=True, exist_ok=True)
        building = path.with_suffix(".building")
        building.unlink(missing_ok=True)
        use_temporary_database(building)
        self._fill(options, agents, embedder)
        point_at(path)  # closed before the rename, opened on the new name when next used
        building.rename(path)  # only a whole store is kept

    def _open_kept_database(
        self, options: dict[str, Any], agents: int, embedder: FakeEmbedder, name: str
    ) -> None:
        """The store kept as the database `name` on the PostgreSQL server: built under another
        name (`_new`: PostgreSQL's names end at 63 bytes) and renamed once whole, as the SQLite
        file is."""
        connection = connections["default"]
        name = name.replace("-", "_")
        point_at(name)  # opened when next used: by then it exists
        with connection._nodb_cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            kept = cursor.fetchone() is not None
            if not kept:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}_new"')
                cursor.execute(f'CREATE DATABASE "{name}_new"')
        if not kept:
            point_at(f"{name}_new")
            call_command("migrate", verbosity=0, interactive=False)
            self._fill(options, agents, embedder)
            point_at(name)  # none left on the database renamed
            with connection._nodb_cursor() as cursor:
                cursor.execute(f'ALTER DATABASE "{name}_new" RENAME TO "{name}"')

    def _fill(self, options: dict[str, Any], agents: int, embedder: FakeEmbedder) -> None:
        rng = random.Random(7)
        per_session = options["messages_per_session"]
        sessions, largest = options["sessions"], options["largest"]
        for s in tqdm(range(sessions), desc="sessions", file=self.stderr._out):
            session = f"session-{s}"
            rows = []
            for i in range(per_session):
                text = _sentence(rng, rng.randint(5, 40))
                rows.append(
                    MainMessage(
                        agent_id=_agent(s, agents, of=sessions, largest=largest),
                        session_id=session,
                        role="user" if i % 2 == 0 else "assistant",
                        content=text,
                        token_count=estimate_tokens(text),
                        # A message a minute, as in a conversation: one bulk insert would
                        # otherwise give thousands of rows the same timestamp.
                        timestamp=START + timedelta(minutes=s * per_session + i),
                    )
                )
            with transaction.atomic():
                MainMessage.objects.bulk_create(rows, batch_size=1000)
                ShortTermMemory.objects.bulk_create(
                    ShortTermMemory(
                        agent_id=_agent(s, agents, of=sessions, largest=largest),
                        session_id=session,
                        content=_sentence(rng, 12),
                    )
                    for _ in range(10)
                )
        LongTermMemory.objects.bulk_create(
            (
                LongTermMemory(
                    agent_id=_agent(m, agents, of=options["memories"], largest=largest),
                    content=_sentence(rng, 10),
                    memory_type=rng.choice(MemoryType.values),
                    access_count=rng.randint(0, 50),
                )
                for m in range(options["memories"])
            ),
            batch_size=1000,
        )
        prepare_index(embedder.signature)  # the vector tables, before their indexes go
        postgres = connections["default"].vendor == "postgresql"
        dimension = embedder.signature.dimension
        with knn_postgres.hnsw_built_after(dimension) if postgres else nullcontext():
            with tqdm(desc="embedding", unit="row", file=self.stderr._out) as bar:
                embed_pending(embedder=embedder, batch_size=500, progress=bar.update)
            embedded = time.perf_counter()
        if postgres:
            seconds = time.perf_counter() - embedded
            self.stderr.write(f"HNSW indexes built after the fill in {seconds:.1f} s")

    @staticmethod
    def _call_each(first: dict[str, int], embedder: FakeEmbedder) -> None:
        """A context call for each agent, in its first session."""
        for agent_id, number in first.items():
            context_build(
                agent_id=agent_id,
                session_id=f"session-{number}",
                query="warm up",
                model_window=8192,
                embedder=embedder,
            )

    def _warm(self, options: dict[str, Any], agents: int, embedder: FakeEmbedder) -> None:
        """One call per agent before the timed runs: each builds the agent's matrices of the
        derived vector index, as a server's first calls do (timed here, not in the runs)."""
        index_numpy.clear()  # the matrices of the previous row's database
        index_text.clear()
        start = time.perf_counter()
        # The per-agent indexes the task worker keeps after embedding (PostgreSQL), for a
        # store kept from before they were built.
        built = index.maintain_agent_indexes()
        if built:
            seconds = time.perf_counter() - start
            self.stderr.write(f"{len(built)} agent index(es) built in {seconds:.1f} s")
            start = time.perf_counter()
        sessions = options["sessions"]
        first = {}  # each agent's first session
        for number in reversed(range(sessions)):
            first[_agent(number, agents, of=sessions, largest=options["largest"])] = number
        self._call_each(first, embedder)
        seconds = time.perf_counter() - start
        if connections["default"].vendor != "sqlite":  # the HNSW index answers: nothing built
            self.stderr.write(f"warm-up: {agents} call(s) in {seconds:.1f} s")
            return
        # The approximate graphs of large agents are built in threads after those calls; a
        # server answers exactly meanwhile, and by the graph once built: timed apart, awaited.
        # Large agents' text indexes likewise (FTS5 answers meanwhile).
        start = time.perf_counter()
        index_numpy.settle()
        index_text.settle()
        self._call_each(first, embedder)  # an agent over the memory bound maps its saved graph
        graphs = time.perf_counter() - start
        report = index_numpy.report()
        text = index_text.report()
        self.stderr.write(
            f"derived vector index: {report.vectors:,} vectors of {agents} agent(s) built in "
            f"{seconds:.1f} s; {report.graphs} approximate graph(s) and {text.indexes} text "
            f"index(es) in {graphs:.1f} s more; {report.bytes / 2**20:.0f} MiB, text "
            f"{text.bytes / 2**20:.0f} MiB"
        )

    def _recall(self, options: dict[str, Any], agents: int, dimension: int) -> str:
        """recall@10 of the messages' KNN (the derived index: its graph where it has one)
        against vec0's exact scan, for the agent holding the first session (the largest).
        Its own embedder and words, so that the timed runs ask what they ask without it."""
        agent = _agent(0, agents, of=options["sessions"], largest=options["largest"])
        embedder = FakeEmbedder(dimension, options["vectors"])
        rng = random.Random(RECALL_SEED)
        found = 0
        for _ in range(options["recall"]):
            vector = query_vector(embedder, f"{_sentence(rng, 6)} #{rng.random()}")
            asked = {"agent_id": agent, "embedding": vector, "k": RECALL_K}
            derived = {hit.id for hit in index.knn(index.MESSAGE_VECTORS, **asked)}
            with _vector_cache_off():
                exact = {hit.id for hit in index.knn(index.MESSAGE_VECTORS, **asked)}
            found += len(derived & exact)
        share = found / (RECALL_K * options["recall"])
        return f"recall@{RECALL_K} against vec0: {share:.3f} ({options['recall']} queries, {agent})"

    def _measure(
        self, options: dict[str, Any], agents: int, embedder: FakeEmbedder, rng: random.Random
    ) -> list[float]:
        timings = []
        for _ in range(options["queries"]):
            query = f"{_sentence(rng, 6)} #{rng.random()}"  # new each time: no cache hit
            query_vector(embedder, query)  # the embedding call is excluded from the figure
            sessions, largest = options["sessions"], options["largest"]
            # With --largest, the largest agent's sessions: the case its goal names.
            number = rng.randrange(round(sessions * largest) or sessions)
            start = time.perf_counter()
            context_build(
                agent_id=_agent(number, agents, of=sessions, largest=largest),
                session_id=f"session-{number}",
                query=query,
                model_window=8192,
                embedder=embedder,
            )
            timings.append(time.perf_counter() - start)
        return timings
