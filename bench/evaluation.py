"""Evaluations on LoCoMo-format data (see ../shared/data/locomo/README.md).

Each conversation becomes one agent, each LoCoMo session one session. Evidence recall: every
question is searched within its conversation's agent as the API's `search()` searches, with
its fusion or another (`FUSIONS`).
The offline extractor: what it makes of each session's messages, as consolidation feeds them,
and how it does on a sample of user turns judged by hand (each turn with the memories a
person would keep).
"""

from __future__ import annotations

import hashlib
import itertools
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
from django.conf import settings
from django.core.management.base import CommandError

from bench.measure import percentile
from memory import embeddings
from memory.context import Context, context_build
from memory.embeddings import Embedder, Signature, prefixed
from memory.extraction import extract_with_sources, offline_extract
from memory.messages import message_add
from memory.models import MainMessage, MemoryType, Role
from memory.search import Fusion, Ranked, SearchQuery, candidates, fuse_weighted
from memory.text import folded, folded_say_the_same
from memory.tokens import estimate_tokens
from memory.vectors import delete_with_vectors, embed_pending, query_embedding

# Reciprocal rank fusion's constant, as its authors set it.
RRF_K = 60


def fuse_rrf(ranked: Sequence[Ranked]) -> dict[int, float]:
    """Reciprocal rank fusion: sum of 1 / (60 + rank) over the lists a hit appears in; the
    search's weighted fusion beat it (docs/EVALUATION.md)."""
    return {
        c.id: sum(1 / (RRF_K + rank) for rank in (c.lexical_rank, c.vector_rank) if rank)
        for c in ranked
    }


# The fusions of a hybrid search `evaluate` compares (eval_locomo --fusion).
FUSIONS: dict[str, Fusion] = {"rrf": fuse_rrf, "weighted": fuse_weighted}


@dataclass
class Report:
    mode: str
    ks: list[int]
    store_question: bool = False
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
            "target": "search",
            "mode": self.mode,
            "store_question": self.store_question,
            "recall": self.recall(),
            "by_category": {
                category: {str(k): round(statistics.fmean(v[k]), 4) for k in self.ks}
                for category, v in sorted(self.by_category.items())
            },
            "category_queries": {
                category: len(v[self.ks[0]]) for category, v in sorted(self.by_category.items())
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
        self.thresholds = embedder.thresholds
        self.batch_size = embedder.batch_size
        name = f"{self.signature.provider}-{self.signature.model}-{self.signature.dimension}"
        self.path = folder / (re.sub(r"[^\w.-]", "_", name) + ".npz")
        self.vectors: dict[str, list[float]] = {}
        if self.path.exists():
            with np.load(self.path) as stored:
                self.vectors = dict(zip(stored["keys"], stored["vectors"].tolist(), strict=True))
        self.dirty = False

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        # Keyed by the text as the model sees it: a query and a document differ by prefix.
        seen = prefixed(self.signature, texts, query=query)
        keys = [hashlib.sha256(text.encode()).hexdigest() for text in seen]
        missing = [i for i, key in enumerate(keys) if key not in self.vectors]
        if missing:
            fresh = self.embedder.embed([texts[i] for i in missing], query=query)
            self.vectors.update({keys[i]: v for i, v in zip(missing, fresh, strict=True)})
            self.dirty = True
        return [self.vectors[key] for key in keys]

    @classmethod
    def configured(cls) -> CachedEmbedder | None:
        """The configured provider's embedder behind the cache in `<data_dir>/cache/`, or None
        without a provider."""
        embedder = embeddings.configured_embedder()
        return cls(embedder, settings.ORCA.data_dir / "cache") if embedder else None

    def save(self) -> None:
        if self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.vectors)
            np.savez(
                self.path, keys=np.array(keys), vectors=np.array([self.vectors[k] for k in keys])
            )


def jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
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


def _message_fields(turn: dict[str, Any], count: int, role: str) -> dict[str, Any]:
    """A turn as a message said by its speaker at its session's time (count: turns before it)."""
    return {
        "agent_id": turn["conversation_id"],
        "session_id": session_key(turn["session_id"]),
        "role": role,
        "content": turn["text"],
        "metadata": {"turn_id": turn["turn_id"], "speaker": turn["speaker"]},
        "timestamp": session_time(turn["session_datetime"]) + timedelta(seconds=count),
    }


def load_conversations(path: Path, *, limit: int | None = None) -> int:
    """Every turn (or the first `limit`) as a message, said by its speaker at its session's
    time, with the roles an agent stores (`speaker_roles`)."""
    count = 0
    roles = speaker_roles()
    for turn in itertools.islice(jsonl_rows(path), limit):
        message_add(**_message_fields(turn, count, roles(turn)))
        count += 1
    return count


def speaker_roles() -> Callable[[dict[str, Any]], str]:
    """The role of each turn as an agent stores a conversation: its first speaker is `user`,
    the other `assistant` (named in the metadata: LoCoMo's second person stays a person's
    words, an agent set's "Assistant" is the agent)."""
    first_speaker: dict[str, str] = {}

    def role(turn: dict[str, Any]) -> str:
        first = first_speaker.setdefault(turn["conversation_id"], turn["speaker"])
        return Role.USER if turn["speaker"] == first else Role.ASSISTANT

    return role


def _store_question(question: dict[str, Any], embedder: Embedder | None) -> MainMessage:
    """The question as an agent stores it before asking: a user message of a new session,
    embedded as the worker would embed it."""
    stored = message_add(
        agent_id=question["conversation_id"],
        session_id=f"question-{question['qa_index']}",
        role="user",
        content=question["question"],
        summarize=False,
    )
    if embedder is not None:
        embed_pending(embedder=embedder)
    return stored


def conversation_sessions(path: Path) -> dict[tuple[str, str], list[MainMessage]]:
    """Each (agent, session)'s turns as unsaved messages, as load_conversations stores them."""
    sessions: dict[tuple[str, str], list[MainMessage]] = defaultdict(list)
    roles = speaker_roles()
    for count, turn in enumerate(jsonl_rows(path)):
        message = MainMessage(**_message_fields(turn, count, roles(turn)))
        sessions[(message.agent_id, message.session_id)].append(message)
    return dict(sessions)


def evaluate(
    path: Path,
    *,
    mode: str,
    ks: list[int],
    fusion: str = "weighted",
    store_question: bool = False,
    embedder: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Evidence recall@k of search; with `store_question`, each question is first stored as
    a message of a new session (deleted after its search)."""
    report = Report(mode=mode, ks=sorted(ks), store_question=store_question)
    for question in jsonl_rows(path):
        evidence = set(question["evidence"])
        if not evidence:
            continue
        stored = _store_question(question, embedder) if store_question else None
        start = time.perf_counter()
        text = question["question"]
        result = candidates(
            agent_id=question["conversation_id"],
            query=SearchQuery(text, mode=mode, k=max(ks)),
            embedded=None if mode == "lexical" else query_embedding(text, embedder),
        ).best(FUSIONS[fusion])
        report.latencies.append(time.perf_counter() - start)
        if stored is not None:
            delete_with_vectors(MainMessage.objects.filter(pk=stored.pk))
        report.degraded.update(result.degraded)
        found = [(hit.message.metadata or {}).get("turn_id") for hit in result.hits]
        for k in report.ks:
            recall = len(evidence & set(found[:k])) / len(evidence)
            report.hits[k].append(recall)
            report.by_category[str(question["category"])][k].append(recall)
        report.queries += 1
        if progress:
            progress(1)
    return report


# --- the context an agent receives -----------------------------------------------------------


def replay_conversations(path: Path, *, end_session: Callable[[str, str], None]) -> int:
    """Every conversation replayed as an agent would store it: one agent per conversation,
    its sessions in order, the first speaker as `user` and the other as `assistant`, each
    session ended (`end_session(agent, session)`) right after its last message."""
    count = 0
    roles = speaker_roles()
    current: tuple[str, str] | None = None
    for turn in jsonl_rows(path):
        fields = _message_fields(turn, count, roles(turn))
        if current is not None and current != (fields["agent_id"], fields["session_id"]):
            end_session(*current)
        current = (fields["agent_id"], fields["session_id"])
        message_add(**fields)
        count += 1
    if current is not None:
        end_session(*current)
    return count


# A turn is in a context when its whole text, its first sentence (of this many characters or
# more) or its first OPENING characters are, whitespace-normalised (issue 33): the context may
# render a long reply by its opening and the sentences that matter, the whole text one call
# away. A shorter first sentence ("Sure!") could stand for many turns.
OPENING = 80
FIRST_SENTENCE = 20
SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")


def whitespace_normalised(text: str) -> str:
    return " ".join(text.split())


def turn_keys(text: str) -> list[str]:
    """What finds a turn in a context: its whole text, its opening and its first sentence (when
    long enough), whitespace-normalised."""
    text = whitespace_normalised(text)
    keys = [text, text[:OPENING]]
    end = SENTENCE_END.search(text)
    if end is not None and end.end() >= FIRST_SENTENCE:
        keys.append(text[: end.end()])
    return keys


def turn_present(text: str, sent: str) -> bool:
    """Whether a turn is in `sent` (whitespace-normalised by the caller) by `turn_keys`."""
    return any(key in sent for key in turn_keys(text))


def turn_texts(path: Path) -> dict[tuple[str, str], str]:
    return {(t["conversation_id"], t["turn_id"]): t["text"] for t in jsonl_rows(path)}


def last_sessions(path: Path) -> dict[str, str]:
    """Each conversation's last session (conversations.jsonl is chronological)."""
    return {t["conversation_id"]: session_key(t["session_id"]) for t in jsonl_rows(path)}


def folded_answer(text: str) -> str:
    return " ".join(re.findall(r"\w+", str(text).lower()))


def duplicate_share(context: Context) -> float:
    """The share of the context's item tokens that repeat another item of it, by the rule the
    context itself dedups with (`folded_say_the_same`): of two items that say the same, the shorter
    (or, as long, the later) counts as the repeat."""
    items = [item.content for layer in context.layers.values() for item in layer.items]
    texts = [folded(text) for text in items]
    repeats = {
        i if len(texts[i]) < len(texts[j]) else j
        for i, j in itertools.combinations(range(len(texts)), 2)
        if folded_say_the_same(texts[i], texts[j])
    }
    total = sum(estimate_tokens(text) for text in items) or 1
    return sum(estimate_tokens(items[i]) for i in repeats) / total


@dataclass
class ContextReport:
    window: int
    same_session: bool
    store_question: bool = True
    queries: int = 0
    evidence: list[float] = field(default_factory=list)
    # The same, a turn also counted when a long-term memory in the context came from it: the
    # agent got what the person said there, in the memory's words (the rule counts
    # messages only).
    by_memory: list[float] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    duplicates: list[float] = field(default_factory=list)
    by_category: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_memory_by_category: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    answers_by_category: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)
    degraded: set[str] = field(default_factory=set)
    budget: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": "context",
            "model_window": self.window,
            "budget": self.budget,
            "same_session": self.same_session,
            "queries": self.queries,
            "evidence_recall": round(statistics.fmean(self.evidence), 4),
            "evidence_by_memory": round(statistics.fmean(self.by_memory), 4),
            "answer_present": round(statistics.fmean(self.answers), 4),
            "tokens_used_mean": round(statistics.fmean(self.used)),
            "duplicate_token_share": round(statistics.fmean(self.duplicates), 4),
            "by_category": {
                category: round(statistics.fmean(values), 4)
                for category, values in sorted(self.by_category.items())
            },
            "by_memory_by_category": {
                category: round(statistics.fmean(values), 4)
                for category, values in sorted(self.by_memory_by_category.items())
            },
            "answer_by_category": {
                category: round(statistics.fmean(values), 4)
                for category, values in sorted(self.answers_by_category.items())
            },
            "category_queries": {
                category: len(values) for category, values in sorted(self.by_category.items())
            },
            "latency_ms": {
                "p50": round(statistics.median(self.latencies) * 1000, 2),
                "p95": round(percentile(self.latencies, 0.95) * 1000, 2),
            },
            "degraded": sorted(self.degraded),
        }


def evaluate_context(
    folder: Path,
    *,
    window: int,
    same_session: bool,
    embedder: Embedder | None = None,
    progress: Callable[[int], None] | None = None,
) -> ContextReport:
    """Each question stored as the user's message (in a new session, or as the next message
    of the conversation's last session), then the context an agent would get for it.

    The question is deleted after its call, so that later questions do not recall it.
    """
    texts = turn_texts(folder / "conversations.jsonl")
    last = last_sessions(folder / "conversations.jsonl")
    turn_ids = {
        (agent, (metadata or {}).get("turn_id")): pk
        for pk, agent, metadata in MainMessage.objects.values_list("pk", "agent_id", "metadata")
    }
    report = ContextReport(window=window, same_session=same_session)
    for question in jsonl_rows(folder / "queries.jsonl"):
        evidence = question["evidence"]
        if not evidence:
            continue
        agent = question["conversation_id"]
        session = last[agent] if same_session else f"question-{question['qa_index']}"
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
        sent = "\n".join(message["content"] for message in context.messages)
        normalised = whitespace_normalised(sent)
        found = [
            turn_present(texts[(agent, turn)], normalised)
            for turn in evidence
            if (agent, turn) in texts
        ]
        recall = sum(found) / len(evidence)
        report.evidence.append(recall)
        sources = {pk for item in context.layers["long_term"].items for pk in item.source_ids}
        by_memory = [
            turn_present(texts[(agent, turn)], normalised) or turn_ids.get((agent, turn)) in sources
            for turn in evidence
            if (agent, turn) in texts
        ]
        report.by_memory.append(sum(by_memory) / len(evidence))
        report.by_memory_by_category[str(question["category"])].append(report.by_memory[-1])
        answered = folded_answer(question["answer"]) in folded_answer(sent)
        report.by_category[str(question["category"])].append(recall)
        report.answers.append(answered)
        report.answers_by_category[str(question["category"])].append(answered)
        report.used.append(sum(estimate_tokens(m["content"]) for m in context.messages))
        report.duplicates.append(duplicate_share(context))
        report.degraded.update(context.degraded)
        report.budget = context.budget
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
        for extracted, (message, *_) in extract_with_sources(messages):
            report.memories.append(
                {
                    "conversation": conversation,
                    "turn_id": message.metadata["turn_id"],
                    "memory_type": extracted.memory_type,
                    "content": extracted.content,
                }
            )
    return report


# A judged turn's expected memories: (type, a part of its text) each.
Expected = list[tuple[str, str]]
JUDGED_AT = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # relative days are dated from this


@dataclass
class JudgedTurn:
    lang: str
    text: str
    expected: Expected
    made: list[tuple[str, str, bool]]  # type, text, right
    missed: Expected


def judge_turn(lang: str, text: str, expected: Expected) -> JudgedTurn:
    """What the extractor made of one user turn: a memory is right when it is one of the
    expected (its type, and the expected part in its text), an expected one that no memory
    is is missed. One memory may hold two expected ones ("I'm Marco and I do DevOps")."""
    message = MainMessage(role=Role.USER, content=text, metadata=None, timestamp=JUDGED_AT)
    items = [(item.memory_type, item.content) for item in offline_extract([message])]

    def holds(item: tuple[str, str], want: tuple[str, str]) -> bool:
        return item[0] == want[0] and want[1] in item[1]

    made = [(*item, any(holds(item, want) for want in expected)) for item in items]
    missed = [want for want in expected if not any(holds(item, want) for item in items)]
    return JudgedTurn(lang, text, expected, made, missed)


def judge_extractor(path: Path) -> list[JudgedTurn]:
    """Each line of `path`: {"lang", "text", "expect": [[type, part], ...]} ([] for none)."""
    return [
        judge_turn(row["lang"], row["text"], [(kind, part) for kind, part in row["expect"]])
        for row in jsonl_rows(path)
    ]


def judged_scores(turns: list[JudgedTurn]) -> dict[str, float | int]:
    """Precision (right of made) and recall (expected found) over the turns."""
    made = sum(len(turn.made) for turn in turns)
    right = sum(ok for turn in turns for *_, ok in turn.made)
    expected = sum(len(turn.expected) for turn in turns)
    found = expected - sum(len(turn.missed) for turn in turns)
    return {
        "turns": len(turns),
        "made": made,
        "right": right,
        "expected": expected,
        "found": found,
        "precision": round(right / made, 3) if made else 1.0,
        "recall": round(found / expected, 3) if expected else 1.0,
    }


def require_data(folder: Path) -> None:
    """A LoCoMo-format folder: conversations.jsonl and queries.jsonl, else CommandError."""
    for name in ("conversations.jsonl", "queries.jsonl"):
        if not (folder / name).is_file():
            raise CommandError(f"{folder / name} does not exist")
