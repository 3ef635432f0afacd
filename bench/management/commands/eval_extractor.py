"""`manage.py eval_extractor DIR`: what the offline extractor makes of LoCoMo-format data.

Each session's turns go to the extractor as consolidation feeds it: in order, each a user
message with its speaker and turn id, as eval_locomo loads them. Nothing is stored. Prints
the memories per conversation and by type, and a seeded random sample with each memory's
source turn, for judging by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.evaluation import evaluate_extractor


class Command(BaseCommand):
    help = "Count and sample the offline extractor's memories on LoCoMo-format conversations."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)
        parser.add_argument("--sample", type=int, default=50, help="memories to show")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="end with one JSON line")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["dir"] / "conversations.jsonl"
        if not path.is_file():
            raise CommandError(f"{path} does not exist")
        data = evaluate_extractor(path).as_dict(sample=options["sample"], seed=options["seed"])
        for conversation, messages in data["messages"].items():
            made = data["memories"][conversation]
            self.stdout.write(f"{conversation}: {made} memories from {messages} messages")
        types = ", ".join(f"{kind} {count}" for kind, count in data["by_type"].items())
        self.stdout.write(f"total: {data['total']} memories ({types})")
        self.stdout.write(f"sample of {len(data['sample'])} (seed {options['seed']}):")
        for memory in data["sample"]:
            source = f"{memory['conversation']} {memory['turn_id']}"
            self.stdout.write(f"  [{source}] {memory['memory_type']}: {memory['content']}")
        if options["json"]:
            self.stdout.write(json.dumps(data, ensure_ascii=False))
