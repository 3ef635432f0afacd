"""The update-heavy evaluation (issue 34): does the context an agent receives hold a changed
fact's current value, and does it show a superseded value as current?

Read on `tests/data/updates` (its README), whose questions name, besides the evidence (the
newest statement's turn), the current value's key phrase (`answer`) and the superseded
values' key phrases (`superseded_values`). For each question, `judge` reads the context:

- **current value held**: the newest statement's turn is in the context as
  `eval_locomo --target context` counts a turn (`turn_present`), or a long-term memory shown
  as current holds the current value's key phrase.
- **a superseded value shown as current** (stale), either of:
  1. a long-term memory shown as current holds an old value's key phrase and not the
     current one. The long-term section is what the agent is told holds, undated, of earlier
     sessions: a memory there is a standing fact unless it says otherwise. A memory that
     holds both values ("I left Paris for Berlin") states the change, not the old value.
  2. an old value's key phrase is in the other layers (recall, working, short-term memory)
     while the context shows the current value nowhere (neither held as above, nor its key
     phrase anywhere in those layers). Recalled messages are dated: an old statement beside
     a newer one is history the agent can read as such; alone, it is the only answer the
     agent has.

A memory is *shown as current* unless it is superseded (`valid_until` passed, or
`superseded_by` set: the supersession's columns) or the context marks it expired. Key
phrases are matched as `phrase_in` says: Chinese as a substring, other text as whole words,
ignoring case.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import Q
from django.utils import timezone

from bench.evaluation import jsonl_rows, turn_present, turn_texts, whitespace_normalised
from bench.measure import percentile
from memory.context import Context, context_build
from memory.context_items import MemoryItem
from memory.embeddings import Embedder
from memory.messages import message_add
from memory.models import LongTermMemory, MainMessage
from memory.text import CJK_RUN
from memory.vectors import delete_with_vectors

KINDS = ("changed_once", "changed_twice", "unchanged")
LANGUAGES = ("en", "zh")


def phrase_in(phrase: str, text: str) -> bool:
    """Whether a value's key phrase is said in `text`: Chinese as a substring (it has no
    spaces between words), other text ignoring case and not next to a Latin letter or digit
    ("Pixel 7" is not in "Pixel 70"; it is in "用Pixel 7。", where `\\b` would not see it)."""
    if CJK_RUN.search(phrase):
        return phrase in text
    pattern = rf"(?<![0-9a-z]){re.escape(phrase)}(?![0-9a-z])"
    return re.search(pattern, text, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Verdict:
    current: str  # how the context holds the current value: "turn", "memory", both, or ""
    stale: list[str]  # each way it shows a superseded value as current ([] for none)


def memories_shown_as_current(context: Context, superseded: set[int]) -> list[MemoryItem]:
    return [
        item
        for item in context.layers["long_term"].items
        if not item.expired and item.id not in superseded
    ]


def other_layers_text(context: Context) -> str:
    """What the context sends besides long-term memory: recall, working and short-term."""
    return "".join(
        piece
        for name, layer in context.layers.items()
        if name != "long_term"
        for item in layer.items
        for piece in item.sent
    )


def judge(
    context: Context, question: dict[str, Any], texts: dict[str, str], superseded: set[int]
) -> Verdict:
    """The module's rules for one question. `texts`: its conversation's turns by id;
    `superseded`: the ids of the context's memories that are superseded."""
    sent = whitespace_normalised("\n".join(m["content"] for m in context.messages))
    current = str(question["answer"])
    memories = memories_shown_as_current(context, superseded)
    ways = []
    if any(turn_present(texts[turn], sent) for turn in question["evidence"]):
        ways.append("turn")
    if any(phrase_in(current, item.content) for item in memories):
        ways.append("memory")
    stale = [
        f"memory #{item.id} shows {old!r}: {item.content}"
        for old in question["superseded_values"]
        for item in memories
        if phrase_in(old, item.content) and not phrase_in(current, item.content)
    ]
    others = other_layers_text(context)
    if not ways and not phrase_in(current, others):
        stale += [
            f"recall shows {old!r} and nothing shows {current!r}"
            for old in question["superseded_values"]
            if phrase_in(old, others)
        ]
    return Verdict("+".join(ways), stale)


def superseded_among(ids: Iterable[int], now: datetime) -> set[int]:
    """Which of these memories are superseded: their `valid_until` has passed, or a newer
    memory supersedes them."""
    return set(
        LongTermMemory.objects.filter(pk__in=list(ids))
        .filter(Q(valid_until__lte=now) | Q(superseded_by__isnull=False))
        .values_list("pk", flat=True)
    )


@dataclass
class UpdatesReport:
    window: int
    budget: int = 0
    questions: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    degraded: set[str] = field(default_factory=set)

    def add(self, question: dict[str, Any], verdict: Verdict) -> None:
        self.questions.append(
            {
                "conversation_id": question["conversation_id"],
                "qa_index": question["qa_index"],
                "question": question["question"],
                "kind": question["category"],
                "language": question["language"],
                "current": verdict.current,
                "stale": verdict.stale,
            }
        )

    @staticmethod
    def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "questions": len(rows),
            "current_value_rate": round(statistics.fmean(bool(r["current"]) for r in rows), 4),
            "stale_as_current": sum(bool(r["stale"]) for r in rows),
        }

    def groups(self, key: str, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.questions:
            rows[row[key]].append(row)
        return {name: self.figures(rows[name]) for name in names if rows[name]}

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": "updates",
            "model_window": self.window,
            "budget": self.budget,
            **self.figures(self.questions),
            "by_kind": self.groups("kind", KINDS),
            "by_language": self.groups("language", LANGUAGES),
            "latency_ms": {
                "p50": round(statistics.median(self.latencies) * 1000, 2),
                "p95": round(percentile(self.latencies, 0.95) * 1000, 2),
            },
            "degraded": sorted(self.degraded),
            "per_question": self.questions,
        }


def evaluate_updates(
    folder: Path,
    *,
    window: int,
    embedder: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
) -> UpdatesReport:
    """Each question stored as the user's message of a new session, as
    `evaluate_context` asks, then judged on the context an agent would get for it."""
    texts = turn_texts(folder / "conversations.jsonl")
    report = UpdatesReport(window=window)
    for question in jsonl_rows(folder / "queries.jsonl"):
        agent = question["conversation_id"]
        session = f"question-{question['qa_index']}"
        stored = message_add(
            agent_id=agent,
            session_id=session,
            role="user",
            content=question["question"],
            summarize=False,
        )
        start = time.perf_counter()
        context = context_build(
            agent_id=agent,
            session_id=session,
            query=question["question"],
            model_window=window,
            embedder=embedder,
        )
        report.latencies.append(time.perf_counter() - start)
        delete_with_vectors(MainMessage.objects.filter(pk=stored.pk))
        shown = [item.id for item in context.layers["long_term"].items]
        own = {turn: text for (other, turn), text in texts.items() if other == agent}
        report.add(question, judge(context, question, own, superseded_among(shown, timezone.now())))
        report.degraded.update(context.degraded)
        report.budget = context.budget
        if progress:
            progress(1)
    return report
