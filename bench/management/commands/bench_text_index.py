"""Recall's text query on a kept `bench_context` store: the service's derived text index
(memory.index_text) against FTS5, interleaved query by query.

Each query is recall's (6 words of the store's vocabulary, 101 candidates, 30 ids excluded);
both sides have seen its words once before they are timed, as a server keeps its counts.
FTS5 answers where the index is off (`text_index_mb` 0), as for a small agent. Prints both
sides' p50 and p95, in time and in this process's CPU time (what a busy machine moves less),
FTS5's whole (ungated) query's, and the top-10 overlap of the index and of FTS5's gated query
with the whole query.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from bench.management.commands.bench_context import _agent, _sentence
from bench.measure import percentile
from bench.tempdb import point_at
from memory import index_sqlite, index_text
from memory.index_schema import MESSAGE_TEXT

CANDIDATES = 101  # recall's: RECALL_CANDIDATES and the one more search asks for


def _overlap(found: list[int], whole: list[int], top: int = 10) -> float:
    """The share of the whole query's top rows found (1 when both found nothing)."""
    if not whole:
        return float(not found)
    return len(set(found[:top]) & set(whole[:top])) / min(top, len(whole))


def _p50_p95(seconds: list[float]) -> str:
    return (
        f"p50 {percentile(seconds, 0.5) * 1000:.2f} ms, p95 {percentile(seconds, 0.95) * 1000:.2f}"
    )


class Command(BaseCommand):
    help = "Recall's text query: the service's text index against FTS5, on a kept store."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("store", type=Path, help="a store kept by bench_context --store")
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--agent", type=int, default=0, help="the agent's number")

    def handle(self, *args: Any, **options: Any) -> None:
        point_at(options["store"])  # open on the configured database for the checks
        call_command("migrate", verbosity=0, interactive=False)  # the text change log
        # The index of any agent, however small: this measures it.
        index_text.MIN_ROWS = 1
        agent = _agent(options["agent"], options["agent"] + 1)
        start = time.perf_counter()
        self._search(agent, "warm up", [])  # starts the agent's build; FTS5 answers it
        index_text.settle()
        report = index_text.report()
        self.stdout.write(
            f"index: {report.rows:,} rows built in {time.perf_counter() - start:.1f} s, "
            f"{report.bytes / 2**20:.0f} MiB"
        )
        rng = random.Random(5)
        times: dict[str, list[float]] = {"index": [], "FTS5": [], "FTS5 ungated": []}
        cpu: dict[str, list[float]] = {side: [] for side in times}
        overlaps: dict[str, list[float]] = {"index": [], "FTS5": []}
        with connection.cursor() as cursor:
            cursor.execute("SELECT max(id) FROM main_messages")
            (top_row,) = cursor.fetchone()
        for number in range(options["queries"]):
            query = f"{_sentence(rng, 6)} #{rng.random()}"
            exclude = list(range(rng.randrange(top_row), top_row, 997))[:30]
            found = self._query(agent, query, exclude, number % 2 == 0, times, cpu)
            for side in overlaps:
                overlaps[side].append(_overlap(found[side], found["FTS5 ungated"]))
        for side, samples in times.items():
            overlap = overlaps.get(side)
            self.stdout.write(
                f"{side}: {_p50_p95(samples)}; CPU {_p50_p95(cpu[side])}"
                + (f"; top-10 overlap {statistics.mean(overlap):.4f}" if overlap else "")
            )

    def _search(self, agent: str, query: str, exclude: list[int]) -> list[int]:
        hits = index_sqlite.lexical_search(
            MESSAGE_TEXT, agent_id=agent, query=query, k=CANDIDATES, exclude=exclude
        )
        return [hit.id for hit in hits]

    def _query(
        self,
        agent: str,
        query: str,
        exclude: list[int],
        index_first: bool,
        times: dict[str, list[float]],
        cpu: dict[str, list[float]],
    ) -> dict[str, list[int]]:
        configured = settings.ORCA
        no_index = dataclasses.replace(configured, text_index_mb=0)

        def fts5() -> list[int]:
            settings.ORCA = no_index
            try:
                return self._search(agent, query, exclude)
            finally:
                settings.ORCA = configured

        def index() -> list[int]:
            return self._search(agent, query, exclude)

        def ungated() -> list[int]:
            gate = index_sqlite.GATE_ROWS
            index_sqlite.GATE_ROWS = 2**62
            try:
                return fts5()
            finally:
                index_sqlite.GATE_ROWS = gate

        fts5()  # the words counted, as a server keeps them
        index()  # the words' rows, kept likewise
        sides: list[tuple[str, Callable[[], list[int]]]] = [("index", index), ("FTS5", fts5)]
        found = {}
        for side, run in [*(sides if index_first else sides[::-1]), ("FTS5 ungated", ungated)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            found[side] = run()
            times[side].append(time.perf_counter() - start)
            cpu[side].append(time.process_time() - start_cpu)
        return found
