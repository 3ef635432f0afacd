"""`manage.py eval_locomo DIR`: what search finds, or what the context an agent receives holds,
on LoCoMo-format data.

Runs in a fresh temporary database, never the user's. `--target search` (the default) loads
the conversations as agents, embeds them with the configured provider and searches every
question; with `--store-question` it replays them as `context` does (an agent's store: its
memories too), and stores each question before its search. `--target context` replays each
conversation as an agent stores it (sessions in order, each ended, the task worker drained:
summaries, consolidation, vectors), then asks every question from a new session (or, with
`--same-session`, as the next message of the last session) and checks which evidence turns
the returned messages hold. `--target updates` replays as `context` does and judges each
question of an updates set (`tests/data/updates`) by `bench.updates`: whether the context
holds the current value of a changed fact, and whether it shows a superseded value as current.
"""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections
from tqdm import tqdm

from bench.evaluation import (
    FUSIONS,
    CachedEmbedder,
    ContextReport,
    Report,
    evaluate,
    evaluate_context,
    load_conversations,
    replay_conversations,
    require_data,
)
from bench.tempdb import use_temporary_database
from bench.updates import UpdatesReport, evaluate_updates
from memory import consolidation
from memory.consolidation import request_consolidation
from memory.models import Trigger
from memory.search import MODES
from memory.vectors import embed_pending


def kind_table(data: dict[str, Any]) -> list[str]:
    """A report's figures per kind of question (its category, named as the set names it), then
    for all questions: evidence recall and answer present (context) or recall@k (search)."""
    if data["target"] == "context":
        columns = ["evidence", "+memory", "answer"]
        rows = {
            kind: [
                recall,
                data["by_memory_by_category"][kind],
                data["answer_by_category"][kind],
            ]
            for kind, recall in data["by_category"].items()
        }
        rows["all"] = [data["evidence_recall"], data["evidence_by_memory"], data["answer_present"]]
    else:
        columns = [f"@{k}" for k in data["recall"]]
        rows = {kind: list(recall.values()) for kind, recall in data["by_category"].items()}
        rows["all"] = list(data["recall"].values())
    counts = data["category_queries"] | {"all": data["queries"]}
    width = max(len("kind"), *(len(kind) for kind in rows))
    lines = [f"  {'kind':<{width}}  questions  " + "  ".join(f"{c:>8}" for c in columns)]
    for kind, values in rows.items():
        figures = "  ".join(f"{value:>8.3f}" for value in values)
        lines.append(f"  {kind:<{width}}  {counts[kind]:>9}  {figures}")
    return lines


def updates_lines(data: dict[str, Any]) -> list[str]:
    """An updates report: the current-value rate and the questions that show a superseded
    value as current, for all questions, per kind and per language; then those questions."""
    lines = [
        f"updates, context window {data['model_window']} (budget {data['budget']}), "
        f"new session, {data['questions']} queries"
    ]
    lines += [f"  degraded: {reason}" for reason in data["degraded"]]
    rows = data["by_kind"] | data["by_language"] | {"all": data}
    width = max(len(name) for name in rows)
    lines.append(f"  {'kind':<{width}}  questions   current  stale as current")
    for name, row in rows.items():
        lines.append(
            f"  {name:<{width}}  {row['questions']:>9}  {row['current_value_rate']:>8.3f}"
            f"  {row['stale_as_current']:>16}"
        )
    for row in data["per_question"]:
        for reason in row["stale"]:
            lines.append(f"  stale: {row['conversation_id']} {row['question']} {reason}")
    latency = data["latency_ms"]
    lines.append(f"  context latency p50 {latency['p50']} ms, p95 {latency['p95']} ms")
    return lines


class Command(BaseCommand):
    help = "Evaluate search or context on LoCoMo-format data (conversations.jsonl, queries.jsonl)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)
        parser.add_argument("--target", choices=("search", "context", "updates"), default="search")
        parser.add_argument("--k", type=int, nargs="+", default=[5, 10], help="search target")
        parser.add_argument("--mode", choices=MODES, default="hybrid", help="search target")
        parser.add_argument("--fusion", choices=sorted(FUSIONS), default="weighted")
        parser.add_argument(
            "--store-question",
            action="store_true",
            help="search target: replay the conversations as an agent stores them (the worker "
            "drained: memories too), and store each question in a new session first",
        )
        parser.add_argument(
            "--window", type=int, default=8192, help="context and updates: the model window"
        )
        parser.add_argument(
            "--same-session",
            action="store_true",
            help="context target: ask as the next message of the conversation's last session",
        )
        parser.add_argument("--json", action="store_true", help="end with one JSON line")

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["dir"]
        require_data(folder)
        with tempfile.TemporaryDirectory(prefix="orca-eval-") as tmp:
            use_temporary_database(Path(tmp) / "eval.db")
            cached = CachedEmbedder.configured()
            if options["target"] == "context":
                report: Report | ContextReport | UpdatesReport = self._context(
                    folder, cached, options
                )
            elif options["target"] == "updates":
                report = self._updates(folder, cached, options)
            else:
                report = self._search(folder, cached, options)
            if cached is not None:
                cached.save()  # the queries' vectors too
            connections["default"].close()
        data = report.as_dict()
        self._print(data)
        if options["json"]:
            self.stdout.write(json.dumps(data))

    def _embed(self, cached: CachedEmbedder | None, loaded: int) -> None:
        if cached is None:
            return
        self.stderr.write(f"Loaded {loaded} messages; embedding with {cached.signature}")
        with tqdm(total=loaded, unit="msg", file=self.stderr._out) as bar:
            embed_pending(embedder=cached, progress=bar.update, batch_size=64)
        cached.save()

    def _search(
        self, folder: Path, cached: CachedEmbedder | None, options: dict[str, Any]
    ) -> Report:
        embedder = cached if options["mode"] != "lexical" else None
        if options["store_question"]:
            # As an agent searches: the conversations stored as it stores them and the
            # worker's work done, so that search knows the person's memories too.
            self._replay(folder, cached)
        else:
            self._embed(embedder, load_conversations(folder / "conversations.jsonl"))
        with tqdm(unit="query", file=self.stderr._out) as bar:
            return evaluate(
                folder / "queries.jsonl",
                mode=options["mode"],
                ks=options["k"],
                fusion=options["fusion"],
                store_question=options["store_question"],
                embedder=embedder,
                progress=bar.update,
            )

    def _replay(self, folder: Path, cached: CachedEmbedder | None) -> None:
        """Each conversation stored as an agent stores it, and the worker's work done."""
        # The 30-second window keeps two extractions of one agent from running at once; this
        # one worker never runs two, so the replay need not wait 30 s between sessions.
        consolidation.CONSOLIDATION_WINDOW = timedelta(0)
        loaded = replay_conversations(
            folder / "conversations.jsonl",
            end_session=lambda agent, session: request_consolidation(
                agent_id=agent, session_id=session, trigger=Trigger.SESSION_END
            ),
        )
        # The messages' vectors from the cache; the worker then runs what the sessions queued
        # (turn summaries, consolidation, their vectors) as `make run`'s worker would.
        self._embed(cached, loaded)
        self.stderr.write("Draining the task worker")
        call_command("db_worker", batch=True, interval=0, verbosity=0)

    def _context(
        self, folder: Path, cached: CachedEmbedder | None, options: dict[str, Any]
    ) -> ContextReport:
        self._replay(folder, cached)
        with tqdm(unit="query", file=self.stderr._out) as bar:
            return evaluate_context(
                folder,
                window=options["window"],
                same_session=options["same_session"],
                embedder=cached,
                progress=bar.update,
            )

    def _updates(
        self, folder: Path, cached: CachedEmbedder | None, options: dict[str, Any]
    ) -> UpdatesReport:
        self._replay(folder, cached)
        with tqdm(unit="query", file=self.stderr._out) as bar:
            return evaluate_updates(
                folder, window=options["window"], embedder=cached, progress=bar.update
            )

    def _print(self, data: dict[str, Any]) -> None:
        if data["target"] == "updates":
            for line in updates_lines(data):
                self.stdout.write(line)
            return
        if data["target"] == "context":
            where = "same session" if data["same_session"] else "new session"
            self.stdout.write(
                f"context, window {data['model_window']} (budget {data['budget']}), {where}, "
                f"{data['queries']} queries"
            )
        else:
            stored = ", question stored" if data["store_question"] else ""
            self.stdout.write(f"mode {data['mode']}{stored}, {data['queries']} queries")
        for reason in data["degraded"]:
            self.stdout.write(f"  degraded: {reason}")
        if data["target"] == "context":
            self.stdout.write(
                f"  evidence recall {data['evidence_recall']:.3f}, answer present "
                f"{data['answer_present']:.3f}, tokens used {data['tokens_used_mean']}, "
                f"duplicate tokens {data['duplicate_token_share']:.1%}"
            )
        else:
            self.stdout.write(
                "  recall " + ", ".join(f"@{k} {v:.3f}" for k, v in data["recall"].items())
            )
        for line in kind_table(data):
            self.stdout.write(line)
        latency = data["latency_ms"]
        call = "context" if data["target"] == "context" else "search"
        self.stdout.write(f"  {call} latency p50 {latency['p50']} ms, p95 {latency['p95']} ms")
