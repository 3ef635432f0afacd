"""`manage.py eval_locomo DIR`: evidence recall@k of search on LoCoMo-format data.

Runs in a fresh temporary database, never the user's: conversations are loaded as agents,
embedded synchronously with the configured provider, and every question is searched.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from tqdm import tqdm

from memory import embeddings
from memory.evaluation import CachedEmbedder, Report, evaluate, load_conversations
from memory.management.tempdb import use_temporary_database
from memory.search import FUSIONS, MODES
from memory.vectors import embed_pending


class Command(BaseCommand):
    help = "Evaluate search on LoCoMo-format data (conversations.jsonl, queries.jsonl)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)
        parser.add_argument("--k", type=int, nargs="+", default=[5, 10])
        parser.add_argument("--mode", choices=MODES, default="hybrid")
        parser.add_argument("--fusion", choices=sorted(FUSIONS), default="weighted")
        parser.add_argument("--json", action="store_true", help="end with one JSON line")

    def handle(self, *args: Any, **options: Any) -> None:
        folder: Path = options["dir"]
        for name in ("conversations.jsonl", "queries.jsonl"):
            if not (folder / name).is_file():
                raise CommandError(f"{folder / name} does not exist")
        with tempfile.TemporaryDirectory(prefix="orca-eval-") as tmp:
            use_temporary_database(Path(tmp) / "eval.db")
            report = self._run(folder, options)
            connections["default"].close()
        self._print(report, options["json"])

    def _run(self, folder: Path, options: dict[str, Any]) -> Report:
        loaded = load_conversations(folder / "conversations.jsonl")
        embedder = embeddings.configured_embedder()
        cached = None
        if options["mode"] != "lexical" and embedder is not None:
            cached = CachedEmbedder(embedder, settings.ORCA.data_dir / "cache")
            self.stderr.write(f"Loaded {loaded} messages; embedding with {embedder.signature}")
            with tqdm(total=loaded, unit="msg", file=self.stderr._out) as bar:
                embed_pending(embedder=cached, progress=bar.update, batch_size=64)
            cached.save()
        with tqdm(unit="query", file=self.stderr._out) as bar:
            report = evaluate(
                folder / "queries.jsonl",
                mode=options["mode"],
                ks=options["k"],
                fusion=options["fusion"],
                embedder=cached,
                progress=bar.update,
            )
        if cached is not None:
            cached.save()  # the queries' vectors too
        return report

    def _print(self, report: Report, as_json: bool) -> None:
        data = report.as_dict()
        self.stdout.write(f"mode {data['mode']}, {data['queries']} queries")
        for reason in data["degraded"]:
            self.stdout.write(f"  degraded: {reason}")
        self.stdout.write(
            "  recall " + ", ".join(f"@{k} {v:.3f}" for k, v in data["recall"].items())
        )
        for category, recall in data["by_category"].items():
            values = ", ".join(f"@{k} {v:.3f}" for k, v in recall.items())
            self.stdout.write(f"  category {category}: {values}")
        latency = data["latency_ms"]
        self.stdout.write(f"  search latency p50 {latency['p50']} ms, p95 {latency['p95']} ms")
        if as_json:
            self.stdout.write(json.dumps(data))
