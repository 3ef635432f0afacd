"""Context assembly: what an agent sends to its LLM before each call, within a token budget.

Four layers share the budget, 60% of the model window:
- working memory: the session's newest messages, up to half of the budget;
- short-term memory: this session's summaries (top 3) of turns no longer in working memory;
- long-term memory: the agent's facts, preferences, decisions, projects (top 2);
- recall: the agent's earlier messages most relevant to the query, by the hybrid search the
  API serves, the best with the reply after it, then the other hits and their replies
  (memory.recall_fill), grouped by session with their dates; what the person said first, an
  agent's long replies after it and compactly (memory.recall_render).
Long-term memory and recall share the last 20%. The budget is a ceiling, not a quota: what
working and short-term memory leave unused goes to recall, and what recall cannot use goes
back to older working messages. When the first three layers alone are over budget, the
design's cut order holds: long-term to 1 item, then short-term to 1, then the oldest working
messages. Every token is counted as sent (labels and headers included), so the returned
messages never exceed the budget, and every item reports its id, score, tokens and method.
The items, what they send and how it is counted: memory.context_items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from itertools import accumulate
from typing import Any

from django.db.models import F, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_noop

from memory import index, outage
from memory.context_items import (
    LONG_TERM_HEADER,
    RECALL_HEADER,
    SHORT_TERM_HEADER,
    Context,
    Item,
    Layer,
    LeftOut,
    MemoryItem,
    RecalledItem,
    SummaryItem,
    WorkingItem,
    date_line,
    header_tokens,
    layer_method,
    system_message,
)
from memory.embeddings import Embedder, Thresholds
from memory.index import Filter
from memory.index_schema import Term, query_terms
from memory.memories import (
    MEMORY_CANDIDATES,
    JudgedMemory,
    current_value,
    judged_memories,
    source_message_ids,
)
from memory.models import LongTermMemory, MainMessage, MemoryType, Role, ShortTermMemory
from memory.phrases import Phrase, attribute_label
from memory.questions import asks_about_replies, is_recommendation
from memory.recall_fill import RecallFiller
from memory.relevance import (
    RECOMMENDATION_FLOOR_SHARE,
    Verdict,
    memory_verdict,
    term_match,
    verdict,
)
from memory.search import (
    MAX_K,
    REMEMBERED,
    SAID_BY_THE_PERSON,
    SearchHit,
    SearchQuery,
    TextSearch,
    search,
    start_text_search,
)
from memory.subagent_run import run_in
from memory.text import folded, folded_say_the_same, has_terms, message_label
from memory.vectors import QueryEmbedding, query_embedding

BUDGET_SHARE = 0.6
LAYER_SHARES = {"working": 0.5, "short_term": 0.3, "long_term": 0.2}
SHORT_TERM_ITEMS = 3
# Working memory reads the session newest first in pages of this many rows, each a query with
# a LIMIT: an iterator would hold a PostgreSQL cursor WITH HOLD outside a transaction, which
# builds the whole session before the first row (7-11 ms for 2,000 messages, against 0.2).
WORKING_PAGE = 64
LONG_TERM_ITEMS = 2
# Identity questions ("do you remember me?") widen long-term recall, what a person confirmed
# first, and top it up with the person's facts and preferences when few match (the second
# design document's lesson): relevant by their type, whatever the words.
IDENTITY_LONG_TERM_ITEMS = 5
# A recommendation must respect several things at once (vegetarian, allergic, on a budget).
RECOMMENDATION_LONG_TERM_ITEMS = 4
WEAK_IDENTITY_MINIMUM = 3
# What an identity question is about, whatever its words: who the person is and what they like.
IDENTITY_TYPES = (MemoryType.FACT, MemoryType.PREFERENCE)
# Expired memories stay retrievable at half weight (the design: 降权而非删除).
EXPIRED_WEIGHT = 0.5
RECALL_CANDIDATES = MAX_K

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


# --- working memory ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    """A message of the session as stored: what its chat form is made from."""

    id: int
    role: str
    content: str
    metadata: dict[str, Any] | None


def _working_rows(agent_id: str, session_id: str, limit: int) -> list[_Row]:
    """The session's messages newest first, as many as could fit in `limit` tokens.

    Rows come newest first from the (agent, session, timestamp) index, a page of
    WORKING_PAGE at a time, and reading stops once their stored token counts pass `limit`
    (as sent, a message counts at least that): a long session costs no more.
    """
    newest_first = (
        MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
        .order_by("-timestamp", "-id")
        .values_list("id", "role", "content", "token_count", "metadata")
    )
    rows: list[_Row] = []
    total = 0
    start = 0
    while True:
        page = list(newest_first[start : start + WORKING_PAGE])
        for pk, role, content, tokens, metadata in page:
            rows.append(_Row(pk, role, content, metadata))
            total += tokens
            if total > limit:
                return rows
        if len(page) < WORKING_PAGE:
            return rows
        start += WORKING_PAGE


class _Working:
    """The session's newest messages as working memory sends them; "the n newest" is an
    unbroken stretch of the conversation. A tool result goes with its call when the call is
    in the stretch and as text when it is not, so a stretch is counted as it is sent."""

    def __init__(self, newest_first: list[_Row]) -> None:
        self.rows = newest_first
        paired = _paired_calls(newest_first[::-1])
        # Each as sent in a stretch that holds the rest of its exchange, and the answers as
        # sent when their call is older than the stretch.
        self.with_call = [_working_item(row, paired=row.id in paired) for row in newest_first]
        self.answers = {
            row.id for row in newest_first if row.role == Role.TOOL and row.id in paired
        }
        self.without_call = {
            row.id: _working_item(row, paired=False)
            for row in newest_first
            if row.id in self.answers
        }
        self.totals = list(accumulate((item.tokens for item in self.with_call), initial=0))

    def _without_their_call(self, n: int) -> range:
        """Of the n newest, the oldest ones: results whose call is older than the stretch.
        (Only the answers of one call can start a stretch: they follow it without a gap.)"""
        start = n
        while start > 0 and self.rows[start - 1].id in self.answers:
            start -= 1
        return range(start, n)

    def items(self, n: int) -> list[WorkingItem]:
        """The n newest, oldest first, as sent."""
        alone = self._without_their_call(n)
        return [
            self.without_call[self.rows[i].id] if i in alone else self.with_call[i]
            for i in reversed(range(n))
        ]

    def tokens(self, n: int) -> int:
        """What the n newest cost as sent."""
        return self.totals[n] + sum(
            self.without_call[self.rows[i].id].tokens - self.with_call[i].tokens
            for i in self._without_their_call(n)
        )

    def fitting(self, allowance: int, taken: int = 0, shown: Collection[int] = ()) -> int:
        """How many of the newest fit in `allowance`, from the `taken` newest on, never
        skipping one and stopping at one that recall or a summary stands for (`shown`)."""
        while (
            taken < len(self.rows)
            and self.rows[taken].id not in shown
            and self.tokens(taken + 1) <= allowance
        ):
            taken += 1
        return taken


# --- short-term memory ---------------------------------------------------------------------


def _short_term(
    agent_id: str,
    session_id: str,
    query: str | None,
    vector: tuple[float, ...] | None,
    working_ids: set[int],
) -> tuple[list[SummaryItem], list[LeftOut]]:
    """The top 3 summaries of turns whose reply is no longer in working memory, and the
    session's other summaries with why they were left out (a session keeps a few)."""
    # A session keeps a few (summaries.SUMMARIES_KEPT): read once, chosen from here.
    session = list(ShortTermMemory.objects.of_session(agent_id, session_id))
    summaries = [s for s in session if s.reply_id not in working_ids]
    # Summaries of turns in working memory come back too, and are dropped below.
    k = min(SHORT_TERM_ITEMS + len(working_ids), index.KNN_MAX_K)
    scores: dict[int, float] = {}
    method, why = "similarity", gettext_noop("the %(n)s nearest")
    if vector is not None:
        hits = index.knn(
            index.SUMMARY_VECTORS,
            agent_id=agent_id,
            embedding=vector,
            k=k,
            filters=[Filter("session_id", "=", session_id)],
        )
        scores = {hit.id: hit.score for hit in hits}
    elif query:  # no vectors (lexical only by choice, or the provider down): text matches
        hits = index.lexical_search(
            index.SUMMARY_TEXT, agent_id=agent_id, query=query, k=k, session_id=session_id
        )
        # As a share of the best match, as long-term memory's: BM25's own scale means nothing
        # to a reader, and words in most of a session's few summaries score near 0.
        best = max((hit.score for hit in hits), default=0) or 1
        scores = {hit.id: hit.score / best for hit in hits}
        method, why = "lexical", gettext_noop("among the %(n)s best text matches")
    chosen = [s for s in summaries if s.pk in scores]
    chosen.sort(key=lambda s: -scores[s.pk])
    chosen = chosen[:SHORT_TERM_ITEMS]
    # Summaries not embedded yet, or that say none of the query's words: the newest fill the
    # remaining places.
    newest = [s for s in summaries if s.pk not in scores]
    chosen += newest[: SHORT_TERM_ITEMS - len(chosen)]
    items = [
        SummaryItem.made(
            s.pk,
            s.content,
            score=scores.get(s.pk),
            method=method if s.pk in scores else "newest",
            # A session's own summaries: the nearest to the query, else the newest.
            why=Phrase(why, n=SHORT_TERM_ITEMS)
            if s.pk in scores
            else gettext_noop("newest summary"),
            reply_id=s.reply_id,
        )
        for s in chosen
    ]
    chosen_ids = {s.pk for s in chosen}
    left_out = [
        LeftOut(
            s.pk,
            gettext_noop("its turn is in working memory")
            if s.reply_id in working_ids
            else Phrase(gettext_noop("ranked below the %(n)s chosen"), n=SHORT_TERM_ITEMS),
            scores.get(s.pk),
        )
        for s in session
        if s.pk not in chosen_ids
    ]
    return items, left_out


def _summarised_messages(agent_id: str, session_id: str, items: list[SummaryItem]) -> set[int]:
    """The messages of the turns these summaries stand for: the reply and the messages
    since the previous reply."""
    session = MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
    turns = Q()  # one query for all: each turn's bounds as a condition
    for item in items:
        if item.reply_id is None:
            continue
        previous = (
            session.filter(role=Role.ASSISTANT, id__lt=item.reply_id).order_by("-id").values("id")
        )
        turns |= Q(id__lte=item.reply_id, id__gt=Coalesce(Subquery(previous[:1]), 0))
    return set(session.filter(turns).values_list("id", flat=True)) if turns else set()


# --- long-term memory ----------------------------------------------------------------------


def _memory_item(
    memory: LongTermMemory, score: float | None, method: str, now: datetime, why: str = ""
) -> MemoryItem:
    expired = memory.is_expired(now)
    if score is not None and expired:
        score *= EXPIRED_WEIGHT
    return MemoryItem.made(
        memory.pk,
        memory.content,
        memory_type=memory.memory_type,
        expired=expired,
        since=memory.said_at.date(),
        confidence=memory.confidence,
        access_count=memory.access_count,
        curated=memory.curated,
        score=score,
        method=method,
        why=why,
    )


def _identity_rank(item: MemoryItem) -> tuple[Any, ...]:
    """What a person wrote or confirmed first, then preferences, then what consolidation
    confirmed more often and what was used more, then the match score."""
    return (
        not item.curated,
        item.memory_type != MemoryType.PREFERENCE,
        -item.confidence,
        -item.access_count,
        -(item.score or 0),
    )


# The layers as cuts name them (the API's words; the dashboard translates them).
LAYER_NAMES = {
    "long_term": gettext_noop("long_term"),
    "short_term": gettext_noop("short_term"),
    "working": gettext_noop("working"),
}


def _identity_why(memory_type: str) -> Phrase:
    return Phrase(gettext_noop("identity question: a %(type)s"), type=Phrase(memory_type))


def _ranked_below(limit: int, identity: bool, expired: bool) -> Phrase:
    if identity:
        ranked = Phrase(gettext_noop("ranked by the identity rule below the %(n)s chosen"), n=limit)
    else:
        ranked = Phrase(gettext_noop("ranked below the %(n)s chosen"), n=limit)
    if not expired:
        return ranked
    return Phrase(
        gettext_noop("%(ranked)s (expired: its score counts %(weight)s)"),
        ranked=ranked,
        weight=f"{EXPIRED_WEIGHT:g}",
    )


def _identity_memories(
    active: QuerySet[LongTermMemory], chosen: list[MemoryItem], now: datetime
) -> list[MemoryItem]:
    """An identity question's top-up: the person's facts and preferences, by the identity
    rule, while fewer than WEAK_IDENTITY_MINIMUM memories matched. Relevant by their type."""
    wanted = WEAK_IDENTITY_MINIMUM - len(chosen)
    if wanted <= 0:
        return []
    of_person = active.filter(memory_type__in=IDENTITY_TYPES).exclude(pk__in=[i.id for i in chosen])
    ordered = of_person.order_by("-curated", "-confidence", "-access_count", "-id")
    items = [
        _memory_item(m, None, "identity", now, _identity_why(m.memory_type))
        for m in ordered[:MEMORY_CANDIDATES]
    ]
    return sorted(items, key=lambda i: (i.expired, _identity_rank(i)))[:wanted]


def _current_values(agent_id: str, query: str, now: datetime) -> list[MemoryItem]:
    """A question about one of the person's attributes ("Which city do I live in now?",
    memory.attributes) gets the newest memory that gives it a value, whatever its score:
    the older values are superseded, and the words of the question may match none."""
    newest = current_value(agent_id, query, now)
    if newest is None:
        return []
    why = Phrase(
        gettext_noop("asks for an attribute (%(attribute)s): its current value"),
        attribute=attribute_label(newest.attribute),
    )
    return [_memory_item(newest, None, "attribute", now, why)]


def _most_used(
    active: QuerySet[LongTermMemory], query: str | None, now: datetime
) -> list[MemoryItem]:
    """The agent's most used memories, for a call with no way to match (expired ones after
    the others). Their inclusion is no use: it is not counted (`_count_uses`)."""
    why = (
        gettext_noop("no query: most used")
        if not query
        else gettext_noop("no way to match the query: most used")
    )
    most_used = sorted(
        active.order_by("-access_count", "-id")[:LONG_TERM_ITEMS],
        key=lambda m: m.is_expired(now),
    )
    return [_memory_item(m, None, "access_count", now, why) for m in most_used]


def _long_term(
    agent_id: str,
    query: str | None,
    embedded: QueryEmbedding,
    identity: bool,
    now: datetime,
) -> _LongTerm:
    """The memories chosen, the candidates passed over with why, and the memories about the
    query at the relevance floor for search's raises."""
    # A superseded memory is out of active recall: the one that replaced it is there instead.
    active = LongTermMemory.objects.filter(agent_id=agent_id).active().current(now)
    vector = embedded.vector
    if query is None or (vector is None and not has_terms(query)):
        # No way to match: no query, or no vector and no term to look up ("👍" alone).
        return _LongTerm(_most_used(active, query, now), [], None)
    method = "similarity" if vector is not None else "lexical"
    floor = embedded.thresholds.identity if identity else embedded.thresholds.relevance
    recommending = is_recommendation(query)
    judged = judged_memories(
        agent_id, query, vector, embedded.thresholds, now, floor=floor, recommending=recommending
    )
    relevant, left_out = _relevant_memories(judged, method, now)
    # Judged at the relevance floor, they are the memories about the query search raises
    # the sources of (memory.search: `about`): found once a call.
    about = None
    if vector is not None and not identity:
        about = [one.memory for one in judged if one.verdict.relevant]
    if identity:
        relevant.sort(key=_identity_rank)
        limit = IDENTITY_LONG_TERM_ITEMS
    else:
        relevant.sort(key=lambda i: -(i.score or 0))
        limit = RECOMMENDATION_LONG_TERM_ITEMS if recommending else LONG_TERM_ITEMS
    chosen = relevant[:limit]
    left_out += [
        LeftOut(i.id, _ranked_below(limit, identity, i.expired), i.score) for i in relevant[limit:]
    ]
    if identity:
        chosen += _identity_memories(active, chosen, now)
        chosen.sort(key=_identity_rank)
    values = _current_values(agent_id, query, now)
    chosen = values + [item for item in chosen if item.id not in {v.id for v in values}]
    chosen_ids = {i.id for i in chosen}
    if method == "similarity":
        waiting, passed = _waiting_for_vectors(
            active.exclude(pk__in=chosen_ids), query, floor, embedded.thresholds, recommending, now
        )
        chosen += waiting
        chosen_ids |= {item.id for item in waiting}
        left_out += passed
    # A match the identity rule took after all is in, not out.
    return _LongTerm(chosen, [left for left in left_out if left.id not in chosen_ids], about)


@dataclass(frozen=True)
class _LongTerm:
    """The long-term layer's memories, those passed over with why, and the memories about
    the query at the relevance floor (None when not judged at it: an identity question, or
    no vector)."""

    chosen: list[MemoryItem]
    left_out: list[LeftOut]
    about: list[LongTermMemory] | None


def _relevant_memories(
    judged: list[JudgedMemory], method: str, now: datetime
) -> tuple[list[MemoryItem], list[LeftOut]]:
    """The judged memories that reach the floors, each saying why it is there, and the others
    with why not."""
    relevant: list[MemoryItem] = []
    left_out: list[LeftOut] = []
    for one in judged:
        item = _memory_item(one.memory, one.score, method, now, one.verdict.why)
        if one.verdict.relevant:
            relevant.append(item)
        else:
            left_out.append(LeftOut(item.id, one.verdict.why, item.score))
    return relevant, left_out


def _waiting_for_vectors(
    active: QuerySet[LongTermMemory],
    query: str,
    floor: float,
    thresholds: Thresholds,
    recommending: bool,
    now: datetime,
) -> tuple[list[MemoryItem], list[LeftOut]]:
    """The memories whose vector the worker has not written yet, which similarity search
    cannot find, judged by their words as on the lexical path (memory.relevance): a memory
    just remembered is in the next call if it says the query's words. The ones that say too
    few are left out, with why; at most LONG_TERM_ITEMS are taken."""
    waiting = list(active.filter(has_embedding=False).order_by("-pk")[:MEMORY_CANDIDATES])
    terms = query_terms(query) if waiting else []
    taken: list[MemoryItem] = []
    passed: list[LeftOut] = []
    for memory in waiting:
        judged = memory_verdict(
            memory_type=memory.memory_type,
            content=memory.content,
            similarity=None,
            thresholds=thresholds,
            base=floor,
            query=query,
            terms=terms,
            recommending=recommending,
            closest=False,  # not embedded: no similarity to be closest by
        )
        if judged.relevant and len(taken) < LONG_TERM_ITEMS:
            why = Phrase(gettext_noop("not embedded yet, by its words: %(why)s"), why=judged.why)
            taken.append(_memory_item(memory, None, "lexical", now, why))
        else:
            why = Phrase(gettext_noop("not embedded yet: %(why)s"), why=judged.why)
            passed.append(LeftOut(memory.pk, why))
    return taken, passed


def _count_uses(items: list[Item], now: datetime) -> None:
    """A memory the query matched, or the identity rule chose, is used once more. One the
    most-used fallback took is not: counted, it would keep itself first."""
    used = [item.id for item in items if item.method != "access_count"]
    if used:
        count = partial(
            LongTermMemory.objects.filter(pk__in=used).update,
            access_count=F("access_count") + 1,
            last_accessed=now,
        )
        outage.best_effort("counting the memories' uses", count)  # the context answers anyway


def _fit(
    layers: dict[str, Layer[Any]], working: _Working, budget: int
) -> tuple[dict[str, Layer[Any]], list[str]]:
    """The design's cut order when the total is over budget: the layers that fit, and what
    was cut."""
    fitted = dict(layers)
    cuts: list[str] = []

    def over() -> bool:
        return sum(layer.used for layer in fitted.values()) > budget

    for name in ("long_term", "short_term"):
        layer = fitted[name]
        if over() and len(layer.items) > 1:
            cuts.append(
                Phrase(
                    gettext_noop("%(layer)s cut from %(n)s to 1 item"),
                    layer=Phrase(LAYER_NAMES[name]),
                    n=len(layer.items),
                )
            )
            fitted[name] = replace(
                layer,
                items=layer.items[:1],
                left_out=[
                    *layer.left_out,
                    *(LeftOut(i.id, gettext_noop("over budget"), i.score) for i in layer.items[1:]),
                ],
            )
    others = sum(layer.used for name, layer in fitted.items() if name != "working")
    taken = kept = len(fitted["working"].items)
    while taken and others + working.tokens(taken) > budget:
        taken -= 1
    if taken < kept:
        cuts.append(
            Phrase(
                gettext_noop("working memory dropped its %(n)s oldest message(s)"),
                n=kept - taken,
            )
        )
        fitted["working"] = replace(fitted["working"], items=working.items(taken))
    return fitted, cuts


# --- assembly ------------------------------------------------------------------------------


def _query_of(agent_id: str, session_id: str, query: str | None) -> tuple[str | None, str]:
    """The query, else the session's newest user message: an agent that stored the user's
    message and asks without a query wants what is relevant to it."""
    if query:
        return query, "request"
    newest = (
        MainMessage.objects.filter(agent_id=agent_id, session_id=session_id, role=Role.USER)
        .order_by("-timestamp", "-id")
        .values_list("content", flat=True)
        .first()
    )
    return (newest, gettext_noop("newest user message")) if newest else (None, "none")


# --- chat messages -------------------------------------------------------------------------


def _tool_call(call: object) -> dict[str, Any] | None:
    """One recorded tool call in the form OpenAI-compatible chat APIs take, None when it is
    malformed. Arguments recorded as a JSON object go as its text (the APIs take a string);
    a call without `type` is a "function" call, the only type there is."""
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        return None
    function = call.get("function")
    if not isinstance(function, dict):
        return None
    call_id, name, arguments = call.get("id"), function.get("name"), function.get("arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not (call_id and isinstance(call_id, str) and name and isinstance(name, str)):
        return None
    if not isinstance(arguments, str):
        return None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_calls(row: _Row) -> tuple[list[dict[str, Any]], int]:
    """The well-formed tool calls an assistant message's metadata records (OpenAI-style
    `tool_calls`), and how many others it records: those are never sent."""
    recorded = (row.metadata or {}).get("tool_calls")
    if row.role != Role.ASSISTANT or recorded is None:
        return [], 0
    if not isinstance(recorded, list):
        return [], 1
    calls: dict[str, dict[str, Any]] = {}
    for call in map(_tool_call, recorded):
        if call is not None:
            calls.setdefault(call["id"], call)  # a repeated id would answer two calls
    return list(calls.values()), len(recorded) - len(calls)


def _tool_call_id(row: _Row) -> str | None:
    value = (row.metadata or {}).get("tool_call_id")
    return value if row.role == Role.TOOL and isinstance(value, str) else None


def _paired_calls(rows: list[_Row]) -> set[int]:
    """Ids of the assistant messages whose every tool call is answered right after it, and of
    those answers: the only tool exchanges an OpenAI-compatible API accepts as such."""
    paired: set[int] = set()
    for position, item in enumerate(rows):
        wanted = {call["id"] for call in _tool_calls(item)[0]}
        answers = []
        for after in rows[position + 1 :]:
            call_id = _tool_call_id(after)
            if call_id is None or call_id not in wanted:
                break
            answers.append(after)
        if wanted and wanted == {_tool_call_id(a) for a in answers}:
            paired.update({item.id, *(a.id for a in answers)})
    return paired


def _as_text(item: _Row) -> str:
    """A tool result without its call, said in words (a sub-agent's result names its agent)."""
    run = run_in(item.metadata)
    if run is not None and run.agent_name is not None:
        return f"[result of sub-agent {run.agent_name}] {item.content}"
    return f"[tool result] {item.content}"


def _working_item(row: _Row, *, paired: bool) -> WorkingItem:
    """A message of working memory as an OpenAI-compatible chat message: a tool exchange whose
    call and answers are all sent (`paired`) keeps `tool_calls` / `tool_call_id`; any other
    tool message becomes an assistant message in words, since a `tool` message without its
    call is refused by those APIs. Malformed tool calls are never sent: the message keeps its
    text, and the item says how many calls were left out."""
    calls, malformed = _tool_calls(row)
    note = (
        f"{malformed} tool call(s) not sent, malformed: each needs an id of its own, "
        'type "function", a function name and its arguments as a string'
        if malformed
        else None
    )
    made = {"role": row.role, "left_out_tool_calls": note}
    if row.role == Role.TOOL and not paired:
        return WorkingItem.made(
            row.id, row.content, _as_text(row), chat_role=Role.ASSISTANT, **made
        )
    if row.role == Role.TOOL:
        return WorkingItem.made(
            row.id,
            row.content,
            row.content,
            chat_role=row.role,
            tool_call_id=_tool_call_id(row),
            **made,
        )
    return WorkingItem.made(
        row.id,
        row.content,
        row.content,
        chat_role=row.role,
        tool_calls=calls if paired else None,
        **made,
    )


def _extend_working(
    layers: dict[str, Layer[Any]], working: _Working, budget: int, summarised: set[int]
) -> Layer[WorkingItem]:
    """Working memory with the older messages of the session that the budget has room for,
    up to the first one that recall or a summary already stands for."""
    layer = layers["working"]
    spare = budget - sum(other.used for other in layers.values())
    shown = {item.id for item in layers["recall"].items} | summarised
    taken = working.fitting(layer.used + spare, len(layer.items), shown)
    if taken == len(layer.items):
        return layer
    extended = replace(layer, items=working.items(taken))
    return replace(extended, budget=max(layer.share, extended.used))


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
    # Rounding leaves a token or two: they belong to the last share, so the shares make the
    # budget exactly.
    shares["long_term"] = budget - shares["working"] - shares["short_term"]
    degraded: list[str] = []
    query, query_source = _query_of(agent_id, session_id, query)
    embedded = QueryEmbedding(None)
    if query:
        embedded = query_embedding(query, embedder)
        if embedded.reason:
            degraded.append(embedded.reason)
    vector = embedded.vector
    identity = is_identity_query(query)
    # The system message opens with today's date: the layers share what it leaves.
    today = date_line(now, query)
    room = budget - header_tokens(today)

    # The design's three layers first, each within its share, with its cut order.
    working = _Working(_working_rows(agent_id, session_id, budget))
    newest = working.items(working.fitting(shares["working"]))
    # Recall's text query, started before the layers are made: on PostgreSQL it runs beside
    # them. Recall takes it if working memory keeps every message it left out.
    newest_ids = {i.id for i in newest}
    text = None
    if query:
        text = start_text_search(agent_id=agent_id, query=_recall_query(query, newest_ids), now=now)
    short_items, short_left_out = _short_term(agent_id, session_id, query, vector, newest_ids)
    long_term = _long_term(agent_id, query, embedded, identity, now)
    sources = source_message_ids([item.id for item in long_term.chosen])  # one query for all
    long_items = [replace(item, source_ids=sources.get(item.id, ())) for item in long_term.chosen]
    layers: dict[str, Layer[Any]] = {
        "working": Layer(shares["working"], shares["working"], "newest", newest),
        "short_term": Layer(
            shares["short_term"],
            shares["short_term"],
            layer_method(short_items, "newest"),
            short_items,
            header_tokens(SHORT_TERM_HEADER),
            short_left_out,
        ),
        "long_term": Layer(
            shares["long_term"],
            shares["long_term"],
            layer_method(long_items, "access_count"),
            long_items,
            header_tokens(LONG_TERM_HEADER),
            long_term.left_out,
        ),
    }
    layers, cuts = _fit(layers, working, room)
    # Recall takes what is left; older working messages then take what recall could not use.
    # Neither repeats a turn a summary in the context stands for.
    summarised = _summarised_messages(agent_id, session_id, layers["short_term"].items)
    recalled = _recall(
        agent_id, query, embedded, layers, room, shares, summarised, now, long_term.about, text
    )
    layers["recall"], layers["long_term"] = recalled.layer, recalled.long_term
    degraded += [reason for reason in recalled.degraded if reason not in degraded]
    if not cuts:
        # Without a memory section there is no system message, and no date line to leave room for.
        sections = any(layers[name].items for name in ("short_term", "long_term", "recall"))
        layers["working"] = _extend_working(
            layers, working, room if sections else budget, summarised
        )
    _count_uses(layers["long_term"].items, now)
    system = system_message(layers, today)
    messages = [{"role": "system", "content": system}] if system else []
    messages += [item.message() for item in layers["working"].items]
    return Context(
        model_window,
        budget,
        query,
        query_source,
        layers,
        messages,
        cuts,
        degraded,
        identity,
        today if system else None,
    )


@dataclass(frozen=True)
class _Recalled:
    """The recall layer; long-term memory without what a recalled message already says; why
    the search could not answer in the mode asked."""

    layer: Layer[RecalledItem]
    long_term: Layer[Any]
    degraded: list[str]


def _recall(
    agent_id: str,
    query: str | None,
    embedded: QueryEmbedding,
    layers: dict[str, Layer[Any]],
    budget: int,
    shares: dict[str, int],
    summarised: set[int],
    now: datetime,
    about: list[LongTermMemory] | None,
    text: TextSearch | None,
) -> _Recalled:
    """The recall layer: what is left of the budget, filled with the best earlier messages
    that reach the relevance floors; long-term memories a recalled message already says make
    room for more."""
    # Its own share: what long-term memory left of their common 20%.
    share = max(0, shares["long_term"] - layers["long_term"].used)
    allowance = budget - sum(other.used for other in layers.values())
    empty = Layer[RecalledItem](share, allowance, "none", [], header_tokens(RECALL_HEADER))
    if not query:
        return _Recalled(empty, layers["long_term"], [])
    working_ids = {i.id for i in layers["working"].items}
    result = search(
        agent_id=agent_id,
        query=_recall_query(query, working_ids),
        embedded=embedded,
        now=now,
        about=about,
        text=text,
    )
    skip = dict.fromkeys(summarised, gettext_noop("in a summarised turn")) | dict.fromkeys(
        working_ids, gettext_noop("in working memory")
    )
    terms = query_terms(query, now=now)  # as the message index reads the query
    verdicts = _recall_verdicts(
        result.hits, query, terms, embedded, recommending=is_recommendation(query)
    )
    relevant = [hit for hit in result.hits if verdicts[hit.message.pk].relevant]
    below = [
        LeftOut(hit.message.pk, verdicts[hit.message.pk].why, hit.score)
        for hit in result.hits
        if not verdicts[hit.message.pk].relevant
    ]
    filler = RecallFiller(
        relevant, skip, result.mode, verdicts, terms, replies_last=not asks_about_replies(query)
    )
    items, left_out = filler.fill(allowance)
    long_term = _without_restated_memories(layers["long_term"], [*layers["working"].items, *items])
    freed = layers["long_term"].used - long_term.used
    if freed:
        allowance += freed
        items, left_out = filler.fill(allowance)
    # A hit below the floors may still come in as a neighbour of one above them.
    recalled = {item.id for item in items}
    left_out += [left for left in below if left.id not in recalled]
    layer = replace(empty, budget=allowance, method=result.mode, items=items, left_out=left_out)
    return _Recalled(layer, long_term, result.degraded)


def _recall_query(query: str, working_ids: set[int]) -> SearchQuery:
    """What recall searches: the earlier messages, those in working memory excluded by id."""
    return SearchQuery(
        query,
        k=RECALL_CANDIDATES,
        exclude_ids=frozenset(working_ids),
        drop_echoes=False,  # the session's own messages are excluded by id
    )


def _recall_verdicts(
    hits: list[SearchHit],
    query: str,
    terms: list[Term],
    embedded: QueryEmbedding,
    *,
    recommending: bool,
) -> dict[int, Verdict]:
    """Whether each hit reaches the floors: its similarity the model's, or the share of the
    query's `terms` its text and label say (memory.relevance). For a recommendation question
    what the person said qualifies at the share of the floor a preference memory does: "I
    can't stand crowded tourist spots" shares no word with "Can you recommend somewhere for a
    weekend away?". A hit search raised as the source of a memory about the query
    (SAID_BY_THE_PERSON, REMEMBERED) qualifies by that: the memory was judged relevant."""
    verdicts: dict[int, Verdict] = {}
    lowered = embedded.thresholds.relevance * RECOMMENDATION_FLOOR_SHARE
    for hit in hits:
        message = hit.message
        known = [reason for reason in (SAID_BY_THE_PERSON, REMEMBERED) if reason in hit.raised]
        if known:
            # What a memory about the query came from, however far its words and vector are.
            verdicts[message.pk] = Verdict(True, Phrase(known[0]))
            continue
        floor = embedded.thresholds.floor(embedded.thresholds.relevance, query, message.content)
        score = hit.vector_score
        if score is not None and score >= floor:
            # Close enough: its words need not be read (most hits, with a vector).
            verdicts[message.pk] = verdict(similarity=score, floor=floor, match=None)
            continue
        if recommending and message.role == Role.USER and score is not None and score >= lowered:
            judged = verdict(similarity=score, floor=lowered, match=None)
            why = Phrase(
                gettext_noop("recommendation question, the person's words: %(why)s"),
                why=judged.why,
            )
            verdicts[message.pk] = Verdict(True, why)
            continue
        label = message_label(message.timestamp, message.role, message.metadata)
        verdicts[message.pk] = verdict(
            similarity=hit.vector_score,
            floor=floor,
            match=term_match(terms, message.content, label),
        )
    return verdicts


def _without_restated_memories(long_term: Layer[Any], messages: list[Item]) -> Layer[Any]:
    """Long-term memory without the memories that a message in the context (working or
    recalled) already says: the message carries its date and its turn. A current value stays:
    only the memory says that it is current (the older values' messages may be there too)."""
    if not long_term.items:
        return long_term
    # Folded once: each memory is compared with every message (~100 of them).
    texts = [(m, folded(m.content)) for m in messages]
    kept: list[Item] = []
    left_out = list(long_term.left_out)
    for item in long_term.items:
        if item.method == "attribute":
            kept.append(item)
            continue
        text = folded(item.content)
        same = next(
            (m for m, content in texts if folded_say_the_same(text, content)),
            None,
        )
        if same is None:
            kept.append(item)
        else:
            said = Phrase(gettext_noop("says the same as message %(id)s"), id=same.id)
            left_out.append(LeftOut(item.id, said, item.score))
    return replace(long_term, items=kept, left_out=left_out)
