"""`manage.py convert_locomo locomo10.json OUT`: the LoCoMo benchmark's file in the format
`eval_locomo` reads (conversations.jsonl and queries.jsonl, described in
tests/data/zh_multisession/README.md, "Format").

LoCoMo (Maharana et al., ACL 2024) is `data/locomo10.json` of github.com/snap-research/LoCoMo,
licensed CC BY-NC 4.0: evaluation only, with attribution, so it is not in this repository.
Each item's sessions become one message a turn, in order; an image a turn shared becomes
" [image: <its caption>]" after the text, as its caption is all a text model sees. Questions
without an `answer` (the adversarial ones, which carry `adversarial_answer`) are left out;
`qa_index` is a question's place in its item's list, kept across what is left out.
`--conversations` keeps some items (docs/EVALUATION.md's figures use conv-26, conv-41,
conv-44, conv-48, conv-49 and conv-50).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

_SESSION = re.compile(r"session_(\d+)")


def message_rows(item: dict[str, Any]) -> list[dict[str, Any]]:
    """One row a turn, sessions in their numeric order (session_10 after session_9)."""
    conversation = item["conversation"]
    numbers = sorted(
        int(match.group(1))
        for key in conversation
        if (match := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
    )
    rows = []
    for number in numbers:
        for turn in conversation[f"session_{number}"]:
            rows.append(
                {
                    "conversation_id": item["sample_id"],
                    "session_id": f"{item['sample_id']}/session_{number}",
                    "session_index": number,
                    "session_datetime": conversation[f"session_{number}_date_time"],
                    "turn_id": turn["dia_id"],
                    "speaker": turn["speaker"],
                    "text": _with_caption(turn),
                }
            )
    return rows


def _with_caption(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [image: {caption}]" if caption else turn["text"]


def query_rows(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "conversation_id": item["sample_id"],
            "qa_index": index,
            "question": qa["question"],
            "answer": str(qa["answer"]),
            "category": qa["category"],
            "evidence": qa.get("evidence", []),
        }
        for index, qa in enumerate(item["qa"])
        if "answer" in qa
    ]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


class Command(BaseCommand):
    help = "Convert LoCoMo's locomo10.json into the format eval_locomo reads."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", type=Path, help="locomo10.json")
        parser.add_argument("out", type=Path, help="the folder to write (made if missing)")
        parser.add_argument(
            "--conversations", help="sample ids to keep, comma-separated (default: all)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        items = self._read(options["source"])
        if options["conversations"]:
            wanted = set(options["conversations"].split(","))
            missing = wanted - {item["sample_id"] for item in items}
            if missing:
                raise CommandError(f"not in {options['source']}: {', '.join(sorted(missing))}")
            items = [item for item in items if item["sample_id"] in wanted]
        out: Path = options["out"]
        out.mkdir(parents=True, exist_ok=True)
        messages = [row for item in items for row in message_rows(item)]
        queries = [row for item in items for row in query_rows(item)]
        _write_jsonl(out / "conversations.jsonl", messages)
        _write_jsonl(out / "queries.jsonl", queries)
        self.stdout.write(
            f"{len(items)} conversations: {len(messages)} messages, {len(queries)} questions "
            f"in {out}"
        )

    def _read(self, source: Path) -> list[dict[str, Any]]:
        try:
            items = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise CommandError(f"cannot read {source}: {error}") from error
        if not isinstance(items, list) or not all(
            isinstance(item, dict) and {"sample_id", "conversation", "qa"} <= item.keys()
            for item in items
        ):
            raise CommandError(
                f"{source} is not LoCoMo's locomo10.json (a list of items with sample_id, "
                "conversation and qa)"
            )
        return items
