"""Recall's text query on a kept `bench_context` store: FTS5 (the service) against an
in-process BM25 index (bench.text_index), interleaved query by query.

Each query is recall's (6 words of the store's vocabulary, 101 candidates, 30 ids excluded);
both sides have seen its words once before they are timed, as a server keeps its counts.
Prints both sides' p50 and p95, in time and in this process's CPU time (what a busy machine
moves less), FTS5's whole (ungated) query's, and the top-10 overlap of the index and of the
service's gated query with the whole query.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from bench.management.commands.bench_context import _agent, _sentence
from bench.measure import percentile
from bench.text_index import TextIndex
from memory import index_sqlite
from memory.index_schema import MESSAGE_TEXT, query_terms

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
    help = "Recall's text query: FTS5 against an in-process BM25 index, on a kept store."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("store", type=Path, help="a store kept by bench_context --store")
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--agent", type=int, default=0, help="the agent's number")

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections["default"]
        connection.close()  # open on the configured database for the checks
        connection.settings_dict["NAME"] = options["store"]
        connection.ensure_connection()
        text = TextIndex(connection.connection)
        self.stdout.write(
            f"index: {text.instances:,} tokens of {len(text.rowids):,} rows read in "
            f"{text.read_seconds:.1f} s, built in {text.build_seconds:.1f} s, "
            f"{text.nbytes / 2**20:.0f} MiB"
        )
        rng = random.Random(5)
        agent = _agent(options["agent"], options["agent"] + 1)
        times: dict[str, list[float]] = {"index": [], "FTS5": [], "FTS5 ungated": []}
        cpu: dict[str, list[float]] = {side: [] for side in times}
        overlaps: dict[str, list[float]] = {"index": [], "FTS5": []}
        top_row = int(text.rowids[-1])
        for number in range(options["queries"]):
            query = f"{_sentence(rng, 6)} #{rng.random()}"
            exclude = list(range(rng.randrange(top_row), top_row, 997))[:30]
            found = self._query(text, agent, query, exclude, number % 2 == 0, times, cpu)
            for side in overlaps:
                overlaps[side].append(_overlap(found[side], found["FTS5 ungated"]))
        for side, samples in times.items():
            overlap = overlaps.get(side)
            self.stdout.write(
                f"{side}: {_p50_p95(samples)}; CPU {_p50_p95(cpu[side])}"
                + (f"; top-10 overlap {statistics.mean(overlap):.4f}" if overlap else "")
            )

    def _query(
        self,
        text: TextIndex,
        agent: str,
        query: str,
        exclude: list[int],
        index_first: bool,
        times: dict[str, list[float]],
        cpu: dict[str, list[float]],
    ) -> dict[str, list[int]]:
        def fts5() -> list[int]:
            hits = index_sqlite.lexical_search(
                MESSAGE_TEXT, agent_id=agent, query=query, k=CANDIDATES, exclude=exclude
            )
            return [hit.id for hit in hits]

        def index() -> list[int]:
            # The terms the service queries: those in half the rows or more left out.
            terms = index_sqlite.weighing_terms(MESSAGE_TEXT, query_terms(query), using="default")
            return [row for row, _ in text.search(terms, exclude, CANDIDATES)]

        def ungated() -> list[int]:
            gate = index_sqlite.GATE_ROWS
            index_sqlite.GATE_ROWS = 2**62
            try:
                return fts5()
            finally:
                index_sqlite.GATE_ROWS = gate

        fts5()  # the words counted, as a server keeps them
        index()  # the words' contributions, kept likewise
        sides = [("index", index), ("FTS5", fts5)]
        found = {}
        for side, run in [*(sides if index_first else sides[::-1]), ("FTS5 ungated", ungated)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            found[side] = run()
            times[side].append(time.perf_counter() - start)
            cpu[side].append(time.process_time() - start_cpu)
        return found
