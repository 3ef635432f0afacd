"""Evaluations on LoCoMo-format data (see ../shared/data/locomo/README.md).

Each conversation becomes one agent, each LoCoMo session one session. Evidence recall: every
question is searched within its conversation's agent through the same `search()` the API uses.
The offline extractor: what it makes of each session's messages, as consolidation feeds them.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memory.embeddings import Embedder, Signature
from memory.extraction import extract_with_sources
from memory.measure import percentile
from memory.messages import message_add
from memory.models import MainMessage, MemoryType, Role
from memory.search import search


@dataclass
class Report:
    mode: str
    ks: list[int]
    queries: int = 0
    hits: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_category: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    latencies: list[float] = field(default_factory=list)
    degraded: set[str] = field(default_factory=set)

    def recall(self) -> dict[str, float]:
        return {str(k): round(statistics.fmean(self.hits[k]), 4) for k in self.ks}

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "recall": self.recall(),
            "by_category": {
                category: {str(k): round(statistics.fmean(v[k]), 4) for k in self.ks}
                for category, v in sorted(self.by_category.items())
            },
            "queries": self.queries,
            "latency_ms": {
                "p50": round(statistics.median(self.latencies) * 1000, 2),
                "p95": round(percentile(self.latencies, 0.95) * 1000, 2),
            },
            "degraded": sorted(self.degraded),
        }


class CachedEmbedder:
    """Remembers vectors across evaluation runs in one .npz file per signature.

    The local model embeds ~50 messages/s on two cores; a rerun should not pay that again.
    """

    def __init__(self, embedder: Embedder, folder: Path) -> None:
        self.embedder = embedder
        self.signature: Signature = embedder.signature
        name = f"{self.signature.provider}-{self.signature.model}-{self.signature.dimension}"
        self.path = folder / (re.sub(r"[^\w.-]", "_", name) + ".npz")
        self.vectors: dict[str, list[float]] = {}
        if self.path.exists():
            with np.load(self.path) as stored:
                self.vectors = dict(zip(stored["keys"], stored["vectors"].tolist(), strict=True))
        self.dirty = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.vectors]
        if missing:
            fresh = self.embedder.embed([texts[i] for i in missing])
            self.vectors.update({keys[i]: v for i, v in zip(missing, fresh, strict=True)})
            self.dirty = True
        return [self.vectors[key] for key in keys]

    def save(self) -> None:
        if self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.vectors)
            np.savez(
                self.path, keys=np.array(keys), vectors=np.array([self.vectors[k] for k in keys])
            )


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def session_key(locomo_session_id: str) -> str:
    # LoCoMo names sessions "conv-26/session_1"; "/" cannot appear in an orca session id.
    return locomo_session_id.replace("/", ":")


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a UTC datetime."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _message_fields(turn: dict[str, Any], count: int) -> dict[str, Any]:
    """A turn as a message said by its speaker at its session's time (count: turns before it)."""
    return {
        "agent_id": turn["conversation_id"],
        "session_id": session_key(turn["session_id"]),
        "role": Role.USER,
        "content": turn["text"],
        "metadata": {"turn_id": turn["turn_id"], "speaker": turn["speaker"]},
        "timestamp": session_time(turn["session_datetime"]) + timedelta(seconds=count),
    }


def load_conversations(path: Path) -> int:
    """Every turn as a message, said by its speaker at its session's time."""
    count = 0
    for turn in _lines(path):
        message_add(**_message_fields(turn, count))
        count += 1
    return count


def conversation_sessions(path: Path) -> dict[tuple[str, str], list[MainMessage]]:
    """Each (agent, session)'s turns as unsaved messages, as load_conversations stores them."""
    sessions: dict[tuple[str, str], list[MainMessage]] = defaultdict(list)
    for count, turn in enumerate(_lines(path)):
        message = MainMessage(**_message_fields(turn, count))
        sessions[(message.agent_id, message.session_id)].append(message)
    return dict(sessions)


def evaluate(
    path: Path,
    *,
    mode: str,
    ks: list[int],
    fusion: str = "weighted",
    embedder: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
) -> Report:
    report = Report(mode=mode, ks=sorted(ks))
    for question in _lines(path):
        evidence = set(question["evidence"])
        if not evidence:
            continue
        start = time.perf_counter()
        result = search(
            agent_id=question["conversation_id"],
            query=question["question"],
            mode=mode,
            k=max(ks),
            fusion=fusion,
            embedder=embedder,
        )
        report.latencies.append(time.perf_counter() - start)
        report.degraded.update(result.degraded)
        found = [hit.message.metadata["turn_id"] for hit in result.hits]
        for k in report.ks:
            recall = len(evidence & set(found[:k])) / len(evidence)
            report.hits[k].append(recall)
            report.by_category[str(question["category"])][k].append(recall)
        report.queries += 1
        if progress:
            progress(1)
    return report


@dataclass
class ExtractorReport:
    messages: Counter[str]  # per conversation
    memories: list[dict[str, str]]  # conversation, turn_id, memory_type, content

    def as_dict(self, *, sample: int, seed: int) -> dict[str, Any]:
        count = min(sample, len(self.memories))
        chosen = sorted(random.Random(seed).sample(range(len(self.memories)), count))
        made = Counter(m["conversation"] for m in self.memories)
        return {
            "messages": dict(self.messages),
            "memories": {conversation: made[conversation] for conversation in self.messages},
            "total": len(self.memories),
            "by_type": {
                kind: sum(m["memory_type"] == kind for m in self.memories)
                for kind in MemoryType.values
            },
            "sample": [self.memories[i] for i in chosen],
        }


def evaluate_extractor(path: Path) -> ExtractorReport:
    """The offline extractor run on each session's turns, in order, as consolidation does."""
    report = ExtractorReport(messages=Counter(), memories=[])
    for (conversation, _), messages in conversation_sessions(path).items():
        report.messages[conversation] += len(messages)
        for extracted, message in extract_with_sources(messages):
            report.memories.append(
                {
                    "conversation": conversation,
                    "turn_id": message.metadata["turn_id"],
                    "memory_type": extracted.memory_type,
                    "content": extracted.content,
                }
            )
    return report
