"""`manage.py eval_extractor DIR`: what the offline extractor makes of LoCoMo-format data;
`manage.py eval_extractor --judged FILE`: how it does on user turns judged by hand.

With DIR, each session's turns go to the extractor as consolidation feeds them: in order,
each a user message with its speaker and turn id, as eval_locomo loads them. Nothing is
stored. Prints the memories per conversation and by type, and a seeded random sample with
each memory's source turn, for judging by hand.

With --judged, each line of FILE is a user turn with the memories a person would keep
(`{"lang", "text", "expect": [[type, part of its text], ...]}`); prints what the extractor
made of each turn (right, wrong, missed) and precision and recall per language.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.evaluation import JudgedTurn, evaluate_extractor, judge_extractor, judged_scores


class Command(BaseCommand):
    help = "Count and sample the offline extractor's memories on LoCoMo-format conversations."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path, nargs="?")
        parser.add_argument("--judged", type=Path, help="a JSONL file of judged user turns")
        parser.add_argument("--sample", type=int, default=50, help="memories to show")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="end with one JSON line")

    def handle(self, *args: Any, **options: Any) -> None:
        if (options["dir"] is None) == (options["judged"] is None):
            raise CommandError("give either DIR or --judged FILE")
        if options["judged"] is not None:
            self._judged(options["judged"], as_json=options["json"])
            return
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

    def _judged(self, path: Path, *, as_json: bool) -> None:
        if not path.is_file():
            raise CommandError(f"{path} does not exist")
        turns = judge_extractor(path)
        for turn in turns:
            self.stdout.write(f"[{turn.lang}] {turn.text}")
            for kind, content, right in turn.made:
                self.stdout.write(f"    {'right' if right else 'WRONG'}  {kind}: {content}")
            for kind, part in turn.missed:
                self.stdout.write(f"    MISSED {kind}: ...{part}...")
            if not turn.made and not turn.missed:
                self.stdout.write("    right  nothing")
        scores = {lang: judged_scores(_of(turns, lang)) for lang in sorted({t.lang for t in turns})}
        scores["all"] = judged_scores(turns)
        for lang, score in scores.items():
            self.stdout.write(
                f"{lang}: precision {score['precision']:.3f} ({score['right']}/{score['made']}),"
                f" recall {score['recall']:.3f} ({score['found']}/{score['expected']}),"
                f" {score['turns']} turns"
            )
        if as_json:
            self.stdout.write(json.dumps(scores))


def _of(turns: list[JudgedTurn], lang: str) -> list[JudgedTurn]:
    return [turn for turn in turns if turn.lang == lang]
