"""Context assembly: what an agent sends to its LLM before each call, within a token budget.

The budget is 60% of the model window: working memory (the session's newest messages) may use
half of it, short-term memory (this session's summaries) and long-term memory (the agent's
facts, preferences, decisions, projects) take their top 3 and top 2. When the whole is over
budget, long-term is cut to 1, then short-term to 1, then the oldest working messages go.
Every item reports its id, score and token count, so a prompt can be explained.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from memory import embeddings, index
from memory.embeddings import Embedder, EmbeddingError
from memory.index import Filter
from memory.models import LongTermMemory, MainMessage, MemoryType, ShortTermMemory
from memory.tokens import estimate_tokens
from memory.vectors import query_vector, vector_search_status

BUDGET_SHARE = 0.6
LAYER_SHARES = {"working": 0.5, "short_term": 0.3, "long_term": 0.2}
SHORT_TERM_ITEMS = 3
LONG_TERM_ITEMS = 2
# Identity questions ("do you remember me?") widen long-term recall, preferences first, and
# top it up with the most used memories when few match (the second design document's lesson).
IDENTITY_LONG_TERM_ITEMS = 5
WEAK_IDENTITY_MINIMUM = 3
IDENTITY_MIN_SIMILARITY = 0.3
# Expired memories stay retrievable at half weight (the design: 降权而非删除).
EXPIRED_WEIGHT = 0.5
LONG_TERM_CANDIDATES = 20

# One table, Chinese and English, matched case-insensitively anywhere in the query.
IDENTITY_PATTERNS: tuple[str, ...] = (
    r"(你|您)?还?记得我",
    r"记不记得",
    r"上次(说|聊|讲|提)",
    r"之前(说|聊|讲|提)过",
    r"我(的)?偏好",
    r"我(都)?喜欢(什么|啥)",
    r"我是谁",
    r"我叫什么",
    r"关于我",
    r"\bdo you (still )?remember\b",
    r"\bremember me\b",
    r"\blast time\b",
    r"\bmy preferences?\b",
    r"\bwhat do i (like|prefer)\b",
    r"\bwho am i\b",
    r"\bwhat'?s my name\b",
    r"\babout me\b",
)
_IDENTITY = re.compile("|".join(IDENTITY_PATTERNS), re.IGNORECASE)


def is_identity_query(query: str | None) -> bool:
    return bool(query and _IDENTITY.search(query))


@dataclass
class Item:
    id: int
    content: str
    tokens: int
    score: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Layer:
    budget: int
    method: str
    items: list[Item]

    @property
    def used(self) -> int:
        return sum(item.tokens for item in self.items)


@dataclass
class Context:
    window: int
    budget: int
    layers: dict[str, Layer]
    messages: list[dict[str, str]]
    cuts: list[str]
    degraded: list[str]
    identity_recall: bool

    @property
    def used(self) -> int:
        return sum(layer.used for layer in self.layers.values())


def _working(agent_id: str, session_id: str, budget: int) -> list[Item]:
    """The newest messages that fit, oldest first.

    Rows stream newest first from the (agent, session, timestamp) index, read backwards, and
    reading stops at the first message that does not fit: a long session costs no more.
    """
    newest_first = (
        MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
        .order_by("-timestamp", "-id")
        .values_list("id", "role", "content", "token_count")
    )
    items: list[Item] = []
    used = 0
    for pk, role, content, tokens in newest_first.iterator(chunk_size=64):
        if used + tokens > budget:
            break
        used += tokens
        items.append(Item(pk, content, tokens, details={"role": role}))
    return items[::-1]


def _short_term(
    agent_id: str, session_id: str, vector: tuple[float, ...] | None
) -> tuple[str, list[Item]]:
    summaries = ShortTermMemory.objects.filter(agent_id=agent_id, session_id=session_id)
    scores: dict[int, float] = {}
    if vector is not None:
        hits = index.knn(
            index.SUMMARY_VECTORS,
            agent_id=agent_id,
            embedding=vector,
            k=SHORT_TERM_ITEMS,
            filters=[Filter("session_id", "=", session_id)],
        )
        scores = {hit.id: 1 - hit.score for hit in hits}
    chosen = list(summaries.filter(pk__in=scores)) if scores else []
    chosen.sort(key=lambda s: -scores[s.pk])
    method = "similarity" if scores else "newest"
    # Summaries not embedded yet (or no vectors at all): the newest fill the remaining places.
    newest = summaries.exclude(pk__in=scores).order_by("-created_at", "-id")
    chosen += list(newest[: SHORT_TERM_ITEMS - len(chosen)])
    return method, [
        Item(s.pk, s.content, estimate_tokens(s.content), scores.get(s.pk)) for s in chosen
    ]


def _memory_item(memory: LongTermMemory, score: float | None, now: datetime) -> Item:
    expired = memory.is_expired(now)
    if score is not None and expired:
        score *= EXPIRED_WEIGHT
    return Item(
        memory.pk,
        memory.content,
        estimate_tokens(memory.content),
        score,
        {"memory_type": memory.memory_type, "expired": expired, "confidence": memory.confidence},
    )


def _long_term_candidates(
    agent_id: str, query: str | None, vector: tuple[float, ...] | None
) -> tuple[str, dict[int, float]]:
    """Scores of the memories that match the query: cosine similarity, else normalised BM25."""
    if vector is not None:
        hits = index.knn(
            index.MEMORY_VECTORS, agent_id=agent_id, embedding=vector, k=LONG_TERM_CANDIDATES
        )
        return "similarity", {hit.id: 1 - hit.score for hit in hits}
    if query:
        hits = index.lexical_search(
            index.MEMORY_TEXT, agent_id=agent_id, query=query, k=LONG_TERM_CANDIDATES
        )
        best = max((hit.score for hit in hits), default=0) or 1
        return "lexical", {hit.id: hit.score / best for hit in hits}
    return "access_count", {}


def _long_term(
    agent_id: str,
    query: str | None,
    vector: tuple[float, ...] | None,
    identity: bool,
    now: datetime,
) -> tuple[str, list[Item]]:
    method, scores = _long_term_candidates(agent_id, query, vector)
    active = LongTermMemory.objects.filter(agent_id=agent_id).active()
    matched = [_memory_item(m, scores[m.pk], now) for m in active.filter(pk__in=scores)]
    if identity:
        matched = [
            i for i in matched if method != "similarity" or i.score >= IDENTITY_MIN_SIMILARITY
        ]
        # Preferences first, then by score.
        matched.sort(key=lambda i: (i.details["memory_type"] != MemoryType.PREFERENCE, -i.score))
        limit, minimum = IDENTITY_LONG_TERM_ITEMS, WEAK_IDENTITY_MINIMUM
    else:
        matched.sort(key=lambda i: -i.score)
        limit, minimum = LONG_TERM_ITEMS, LONG_TERM_ITEMS
    chosen = matched[:limit]
    if len(chosen) < minimum:
        # Few matches: the agent's most used memories, expired ones after the others.
        most_used = sorted(
            active.exclude(pk__in=[i.id for i in chosen]).order_by("-access_count", "-id")[
                :minimum
            ],
            key=lambda m: m.is_expired(now),
        )
        chosen += [_memory_item(m, None, now) for m in most_used][: minimum - len(chosen)]
        if not scores:
            method = "access_count"
    return method, chosen


def _fit(layers: dict[str, Layer], budget: int) -> list[str]:
    """The design's cut order when the total is over budget; returns what was cut."""
    cuts: list[str] = []

    def over() -> bool:
        return sum(layer.used for layer in layers.values()) > budget

    for name in ("long_term", "short_term"):
        layer = layers[name]
        if over() and len(layer.items) > 1:
            cuts.append(f"{name} cut from {len(layer.items)} to 1 item")
            layer.items = layer.items[:1]
    working = layers["working"]
    dropped = 0
    while over() and working.items:
        working.items.pop(0)
        dropped += 1
    if dropped:
        cuts.append(f"working memory dropped its {dropped} oldest message(s)")
    return cuts


def _system_message(layers: dict[str, Layer]) -> str | None:
    sections = []
    if layers["long_term"].items:
        lines = [
            f"- [{i.details['memory_type']}{', expired' if i.details['expired'] else ''}] "
            f"{i.content}"
            for i in layers["long_term"].items
        ]
        sections.append("Long-term memory (from earlier sessions):\n" + "\n".join(lines))
    if layers["short_term"].items:
        lines = [f"- {i.content}" for i in layers["short_term"].items]
        sections.append("Earlier in this session:\n" + "\n".join(lines))
    return "\n\n".join(sections) or None


def _query_vector(
    query: str | None, embedder: Embedder | None, degraded: list[str]
) -> tuple[float, ...] | None:
    """The query embedded once, for both memory layers; None when vectors cannot be used."""
    if not query:
        return None
    embedder = embedder or embeddings.configured_embedder()
    status = vector_search_status(embedder)
    if not status.enabled:
        degraded.append(f"no vector search: {status.reason}")
        return None
    try:
        return query_vector(embedder, query)
    except EmbeddingError as exc:
        degraded.append(f"the query could not be embedded: {exc}")
        return None


def context_build(
    *,
    agent_id: str,
    session_id: str,
    query: str | None,
    model_window: int,
    embedder: Embedder | None = None,
) -> Context:
    """The messages to send for the session's next LLM call, and why each is there."""
    now = timezone.now()
    budget = int(model_window * BUDGET_SHARE)
    shares = {name: int(budget * share) for name, share in LAYER_SHARES.items()}
    degraded: list[str] = []
    vector = _query_vector(query, embedder, degraded)
    identity = is_identity_query(query)
    short_method, short_items = _short_term(agent_id, session_id, vector)
    long_method, long_items = _long_term(agent_id, query, vector, identity, now)
    layers = {
        "working": Layer(
            shares["working"], "newest", _working(agent_id, session_id, shares["working"])
        ),
        "short_term": Layer(shares["short_term"], short_method, short_items),
        "long_term": Layer(shares["long_term"], long_method, long_items),
    }
    cuts = _fit(layers, budget)
    LongTermMemory.objects.filter(pk__in=[i.id for i in layers["long_term"].items]).update(
        access_count=F("access_count") + 1, last_accessed=now
    )
    system = _system_message(layers)
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": i.details["role"], "content": i.content} for i in layers["working"].items]
    return Context(model_window, budget, layers, messages, cuts, degraded, identity)
