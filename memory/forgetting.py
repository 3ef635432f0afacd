"""Forget on request: a session, a whole agent, or everything matching a query, from every
copy, each with a receipt (`ForgetReceipt`) that holds ids and counts, never content.

What goes with the messages forgotten, in one transaction with the receipt:
- their sub-agent transcripts (the database's ON DELETE CASCADE), vectors (and the derived
  index's change log, `vectors.delete_with_vectors`) and lexical index rows (triggers); the
  messages after a forgotten one hold its text in their context (`ctx`): made again;
- the summaries of the forgotten sessions, and of the turns a forgotten message is part of
  (the summary of the reply that ended its turn, `ShortTermMemory.reply_id`);
- the long-term memories left without a source: every source was a forgotten message
  (`MemorySource`), or, for a memory with no source rows (made before migration 0023), its
  `source_session` is forgotten whole. A memory with another source, a message that stays
  or a person (`written_by`), stays and loses the forgotten messages (the database's
  cascade);
- the whole history of the memories forgotten, and of those an ordinary delete removed
  earlier from a forgotten session (the history keeps a deleted memory's text);
- the consolidation runs of the forgotten sessions;
- the idempotency records naming a forgotten message are scrubbed (`idempotency.scrub`).
After the commit, the lines of the forgotten messages leave the JSONL backup
(`jsonl.backup_drop`), so `migrate_jsonl` of the backup folder cannot bring them back (for
a session or an agent, its lines of messages said before the forget was asked: a message
acknowledged meanwhile keeps its line); a failure there is logged, and the database is
already consistent. The API keys stay: they
are access, not memory (the admin revokes keys).

A query ("forget everything matching X") is two steps. The preview (`forget_preview`) lists
what would go, with snippets, and a signed token of the ids; the confirm
(`forget_confirmed`) deletes those rows and what was derived from them since (a memory
consolidation made meanwhile from a forgotten message), nothing else. A retried confirm
deletes nothing and answers the receipt that did.

Matching (`_says_all`): a message, summary, memory or history row matches when its own text
says every term of the query (`index_schema.query_terms`: its words, English stop words
dropped, and the bigrams of its Chinese), a word as a whole word in any case. Not the top k of
a ranked search with a score floor: a forget must be complete, a score's meaning changes with
the corpus and the engine (BM25 in FTS5 and in PostgreSQL differ), and a person must be able
to tell why each row matched. Not through a message's context (`ctx`) or its date label
either: a message that only follows one that says X does not say X.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core import signing
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from memory import idempotency, index, jsonl, recall_render, text, vectors
from memory.index_schema import Term, query_terms
from memory.jsonl import Parsed
from memory.models import (
    ConsolidationRun,
    ForgetReceipt,
    ForgetScope,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemoryAction,
    MemorySource,
    Role,
    ShortTermMemory,
)
from memory.subagent_run import transcript_count
from memory.validation import InvalidInput, check_identifier, check_query

logger = logging.getLogger(__name__)

# Rows a query's forget takes at most: beyond that, a session's or the agent's forget fits.
MAX_MATCHES = 10_000
# Snippets a preview shows per kind (its ids and counts are complete).
PREVIEW_ITEMS = 50
# How long a preview's token can be confirmed.
PREVIEW_MAX_AGE = 3600
_TOKEN_SALT = "memory.forgetting.preview"

# The kinds a receipt counts, in the order pages show them; the first six with their ids.
KINDS = (
    "messages",
    "summaries",
    "memories",
    "history",
    "consolidation_runs",
    "idempotency_keys",
    "transcripts",
    "memory_sources",
    "backup_lines",
)
# What a preview's token names; the rest follows from them.
NAMED = ("messages", "summaries", "memories", "history")


@dataclass(frozen=True)
class Plan:
    """What one forget deletes: querysets of one agent's rows, read when it runs."""

    agent_id: str
    scope: str
    session_id: str | None
    messages: QuerySet[MainMessage]
    summaries: QuerySet[ShortTermMemory]
    memories: QuerySet[LongTermMemory]
    history: QuerySet[LongTermMemoryHistory]
    runs: QuerySet[ConsolidationRun]
    # The backup lines that go, given the messages' keys (None: the scope says which).
    backup_lines: Callable[[Parsed], bool] | None = None


@dataclass(frozen=True)
class Tally:
    """What a plan deletes, read before it does: ids and counts per kind (KINDS)."""

    ids: dict[str, list[int]]
    counts: dict[str, int]
    backup_lines: Callable[[Parsed], bool]
    # The messages after the forgotten ones whose `ctx` holds their text.
    reindex: list[int] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(self.counts.values())


# --- the three scopes ------------------------------------------------------------------------


def _said_by(line: Parsed, asked: datetime) -> bool:
    """A backup line of a message said before the forget was asked: one the service
    acknowledged after it (the same session, stored while the forget ran) keeps its line."""
    return line.timestamp is None or line.timestamp <= asked


def session_plan(*, agent_id: str, session_id: str) -> Plan:
    asked = timezone.now()
    messages = MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
    memories = _left_without_sources(agent_id, messages, sessions_gone=[session_id])
    return Plan(
        agent_id=agent_id,
        scope=ForgetScope.SESSION,
        session_id=session_id,
        messages=messages,
        summaries=ShortTermMemory.objects.filter(agent_id=agent_id, session_id=session_id),
        memories=memories,
        history=_history_of(agent_id, memories, sessions_gone=[session_id]),
        runs=ConsolidationRun.objects.filter(agent_id=agent_id, session_id=session_id),
        backup_lines=lambda line: line.session_id == session_id and _said_by(line, asked),
    )


def agent_plan(*, agent_id: str) -> Plan:
    asked = timezone.now()
    return Plan(
        agent_id=agent_id,
        scope=ForgetScope.AGENT,
        session_id=None,
        messages=MainMessage.objects.filter(agent_id=agent_id),
        summaries=ShortTermMemory.objects.filter(agent_id=agent_id),
        memories=LongTermMemory.objects.filter(agent_id=agent_id),
        history=LongTermMemoryHistory.objects.filter(agent_id=agent_id),
        runs=ConsolidationRun.objects.filter(agent_id=agent_id),
        backup_lines=lambda line: _said_by(line, asked),
    )


def _named_plan(agent_id: str, ids: dict[str, list[int]]) -> Plan:
    """A query's forget: the rows a preview named, and what follows from their messages."""
    messages = MainMessage.objects.filter(agent_id=agent_id, pk__in=ids["messages"])
    gone = _sessions_gone(agent_id, messages)
    memories = LongTermMemory.objects.filter(
        Q(pk__in=ids["memories"])
        | Q(pk__in=_left_without_sources(agent_id, messages, sessions_gone=gone))
    ).filter(agent_id=agent_id)
    return Plan(
        agent_id=agent_id,
        scope=ForgetScope.QUERY,
        session_id=None,
        messages=messages,
        summaries=ShortTermMemory.objects.filter(
            Q(pk__in=ids["summaries"]) | Q(reply_id__in=_replies_ending_turns(messages))
        ).filter(agent_id=agent_id),
        memories=memories,
        history=LongTermMemoryHistory.objects.filter(
            Q(pk__in=ids["history"]) | Q(pk__in=_history_of(agent_id, memories, sessions_gone=gone))
        ).filter(agent_id=agent_id),
        runs=ConsolidationRun.objects.filter(agent_id=agent_id, session_id__in=gone),
    )


def _left_without_sources(
    agent_id: str, messages: QuerySet[MainMessage], *, sessions_gone: Collection[str]
) -> QuerySet[LongTermMemory]:
    """The agent's memories whose every source is among `messages`, and those with no
    source rows whose `source_session` is gone whole."""
    others = MemorySource.objects.filter(memory_id=OuterRef("pk")).filter(
        Q(message__isnull=True) | ~Q(message__in=messages)
    )
    from_these = MemorySource.objects.filter(agent_id=agent_id, message__in=messages)
    mine = LongTermMemory.objects.filter(agent_id=agent_id)
    sourced = mine.filter(pk__in=from_these.values("memory_id")).exclude(Exists(others))
    unsourced = mine.filter(source_session__in=list(sessions_gone)).exclude(
        Exists(MemorySource.objects.filter(memory_id=OuterRef("pk")))
    )
    return mine.filter(Q(pk__in=sourced.values("pk")) | Q(pk__in=unsourced.values("pk")))


def _history_of(
    agent_id: str, memories: QuerySet[LongTermMemory], *, sessions_gone: Collection[str]
) -> QuerySet[LongTermMemoryHistory]:
    """The history of these memories, and of the memories an ordinary delete removed
    earlier from a gone session (their delete row keeps what they were, session included)."""
    deleted_earlier = LongTermMemoryHistory.objects.filter(
        agent_id=agent_id,
        action=MemoryAction.DELETE,
        old_values__source_session__in=list(sessions_gone),
    ).values("memory_id")
    return LongTermMemoryHistory.objects.filter(agent_id=agent_id).filter(
        Q(memory_id__in=memories.values("pk")) | Q(memory_id__in=deleted_earlier)
    )


def _sessions_gone(agent_id: str, messages: QuerySet[MainMessage]) -> list[str]:
    """The sessions of `messages` that keep no other message."""
    sessions = set(messages.values_list("session_id", flat=True))
    kept = (
        MainMessage.objects.filter(agent_id=agent_id, session_id__in=sessions)
        .exclude(pk__in=messages.values("pk"))
        .values_list("session_id", flat=True)
    )
    return sorted(sessions - set(kept))


def _replies_ending_turns(messages: QuerySet[MainMessage]) -> list[int]:
    """The assistant replies that end a turn one of `messages` is part of: the first reply
    at or after each message in its session (a summary names its turn by that reply)."""
    wanted = set(messages.values_list("pk", flat=True))
    replies: list[int] = []
    sessions = messages.order_by().values_list("agent_id", "session_id").distinct()
    for agent_id, session_id in sessions:
        pending = False
        timeline = MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
        for pk, role in timeline.order_by("timestamp", "id").values_list("pk", "role"):
            pending = pending or pk in wanted
            if role == Role.ASSISTANT:
                if pending:
                    replies.append(pk)
                pending = False
    return replies


# --- running a plan ----------------------------------------------------------------------------


def tally(plan: Plan) -> Tally:
    """What `plan` deletes, read now (read-only: a preview's numbers are the deletion's)."""
    ids = {
        "messages": _ids(plan.messages),
        "summaries": _ids(plan.summaries),
        "memories": _ids(plan.memories),
        "history": _ids(plan.history),
        "consolidation_runs": _ids(plan.runs),
    }
    keyed = None if plan.scope == ForgetScope.AGENT else ids["messages"]
    ids["idempotency_keys"] = idempotency.records_naming(agent_id=plan.agent_id, message_ids=keyed)
    backup_lines = plan.backup_lines or _lines_of(plan.agent_id, plan.messages)
    counts = {kind: len(values) for kind, values in ids.items()}
    counts["transcripts"] = transcript_count(plan.messages)
    counts["memory_sources"] = (
        MemorySource.objects.filter(agent_id=plan.agent_id, message__in=plan.messages)
        .exclude(memory__in=plan.memories)
        .count()
    )
    counts["backup_lines"] = jsonl.backup_drop(plan.agent_id, backup_lines, dry_run=True)
    reindex: list[int] = []
    if plan.scope == ForgetScope.QUERY:
        gone = set(ids["messages"])
        reindex = sorted({n for pk in gone for n in index.messages_after(pk)} - gone)
    return Tally(
        ids=ids,
        counts={kind: counts[kind] for kind in KINDS},
        backup_lines=backup_lines,
        reindex=reindex,
    )


def _ids(rows: QuerySet[Any]) -> list[int]:
    return sorted(rows.values_list("pk", flat=True))


def _lines_of(agent_id: str, messages: QuerySet[MainMessage]) -> Callable[[Parsed], bool]:
    """The backup lines of these messages: the same key (`Parsed.key`) as the message."""
    keys = {
        Parsed(m.session_id, m.role, m.content, m.msg_type, m.metadata or None, m.timestamp).key(
            agent_id
        )
        for m in messages.only(
            "session_id", "role", "content", "msg_type", "metadata", "timestamp"
        ).iterator()
    }
    return lambda line: line.key(agent_id) in keys


def forget(plan: Plan, *, actor: str) -> ForgetReceipt | None:
    """Delete what `plan` names and write its receipt, all in one transaction; the backup's
    lines after the commit. None, writing nothing, when the plan finds nothing."""
    with transaction.atomic():
        found = tally(plan)
        if found.empty:
            return None
        # Whole rows first, then their derived copies: the receipt names what it saw.
        for model, kind in (
            (LongTermMemoryHistory, "history"),
            (ConsolidationRun, "consolidation_runs"),
        ):
            for chunk in _chunks(found.ids[kind]):
                model.objects.filter(pk__in=chunk).delete()
        idempotency.scrub(found.ids["idempotency_keys"])
        for model, kind in (
            (LongTermMemory, "memories"),
            (ShortTermMemory, "summaries"),
            (MainMessage, "messages"),
        ):
            for chunk in _chunks(found.ids[kind]):
                vectors.delete_with_vectors(model.objects.filter(pk__in=chunk))
        index.reindex_messages(found.reindex)
        receipt = ForgetReceipt.objects.create(
            agent_id=plan.agent_id,
            scope=plan.scope,
            session_id=plan.session_id,
            actor=actor,
            counts=found.counts,
            ids={kind: found.ids[kind] for kind in found.ids},
        )
        transaction.on_commit(lambda: _after_commit(plan.agent_id, found.backup_lines))
    return receipt


def _chunks(ids: list[int], size: int = 5000) -> Iterable[list[int]]:
    """Ids a statement at a time: the exact rows the receipt names (a filter read again could
    take a row committed since), in lists SQLite's bound on parameters accepts."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _after_commit(agent_id: str, backup_lines: Callable[[Parsed], bool]) -> None:
    """The copies outside the database: the backup's lines, the agent's saved vector graphs,
    and this process's caches of texts (other processes drop theirs as they fill up again)."""
    try:
        jsonl.backup_drop(agent_id, backup_lines)
    except OSError:
        logger.exception(
            "FORGET INCOMPLETE: the JSONL backup of agent %s still holds forgotten lines", agent_id
        )
    try:
        index.drop_saved_graphs(agent_id=agent_id)
    except OSError:
        logger.exception(
            "FORGET INCOMPLETE: a saved vector graph of agent %s could not be deleted", agent_id
        )
    vectors.query_vector.cache_clear()
    text.clear_cache()
    recall_render.clear_cache()


# --- the entry points' calls -----------------------------------------------------------------


def forget_session(*, agent_id: str, session_id: str, actor: str) -> ForgetReceipt | None:
    """Forget a session (the API's `DELETE /sessions/{id}`); None when it has nothing."""
    check_identifier("session_id", session_id)
    return forget(session_plan(agent_id=agent_id, session_id=session_id), actor=actor)


def forget_agent(*, agent_id: str, actor: str) -> ForgetReceipt | None:
    """Forget everything the agent stored; None when it has nothing. Its receipts stay."""
    check_identifier("agent_id", agent_id)
    return forget(agent_plan(agent_id=agent_id), actor=actor)


@dataclass(frozen=True)
class PreviewItem:
    kind: str  # "messages", "summaries" or "memories"
    id: int
    session_id: str | None
    parts: list[tuple[str, bool]]  # the snippet, matches marked (memory.text.snippet)

    @property
    def snippet(self) -> str:
        return "".join(part for part, _ in self.parts)


@dataclass(frozen=True)
class Preview:
    """What a query's forget would delete, and the token that confirms exactly that."""

    terms: list[str]
    counts: dict[str, int]
    ids: dict[str, list[int]]
    items: list[PreviewItem]
    token: str


def forget_preview(*, agent_id: str, query: str) -> Preview:
    """What forgetting everything matching `query` would delete (nothing is)."""
    check_query("query", query)
    terms = [t for t in query_terms(query) if t.kind != "day"]
    named = {
        "messages": _matching(MainMessage.objects.filter(agent_id=agent_id), terms),
        "summaries": _matching(ShortTermMemory.objects.filter(agent_id=agent_id), terms),
        "memories": _matching(LongTermMemory.objects.filter(agent_id=agent_id), terms),
        "history": _matching_history(agent_id, terms),
    }
    for kind, ids in named.items():
        if len(ids) > MAX_MATCHES:
            raise InvalidInput(
                f"the query matches more than {MAX_MATCHES:,} {kind}: say more of what to "
                "forget, or forget whole sessions or the agent",
                field="query",
            )
    found = tally(_named_plan(agent_id, named))
    payload = {"agent_id": agent_id, **{kind: found.ids[kind] for kind in NAMED}}
    return Preview(
        terms=[t.text for t in terms],
        counts=found.counts,
        ids=found.ids,
        items=_items(found.ids, text.highlight_terms(query)),
        token=signing.dumps(payload, salt=_TOKEN_SALT, compress=True),
    )


def forget_confirmed(*, agent_id: str, token: str, actor: str) -> tuple[ForgetReceipt, bool]:
    """Delete what a preview's token names (and what follows from it now); the receipt, and
    whether it is an earlier one: a retried confirm finds nothing left and answers the
    receipt that deleted it. InvalidInput for a token that is not this agent's preview."""
    ids = _token_ids(agent_id, token)
    receipt = forget(_named_plan(agent_id, ids), actor=actor)
    if receipt is not None:
        return receipt, False
    earlier = _receipt_naming(agent_id, ids)
    if earlier is not None:
        return earlier, True
    # Gone by another route (an ordinary delete, the session's forget): nothing to record.
    raise InvalidInput("nothing of this preview is left to forget", field="token")


def _token_ids(agent_id: str, token: str) -> dict[str, list[int]]:
    try:
        payload = signing.loads(token, salt=_TOKEN_SALT, max_age=PREVIEW_MAX_AGE)
    except signing.SignatureExpired:
        raise InvalidInput(
            "this preview is over an hour old: preview the forget again", field="token"
        ) from None
    except signing.BadSignature:
        raise InvalidInput("token is not a preview's token", field="token") from None
    if payload.get("agent_id") != agent_id:
        raise InvalidInput("token is the preview of another agent's forget", field="token")
    return {kind: [int(pk) for pk in payload[kind]] for kind in NAMED}


def _receipt_naming(agent_id: str, ids: dict[str, list[int]]) -> ForgetReceipt | None:
    """The agent's newest receipt that deleted any of these rows."""
    wanted = {kind: set(values) for kind, values in ids.items()}
    for receipt in ForgetReceipt.objects.filter(agent_id=agent_id).order_by("-at", "-id"):
        if any(wanted[kind] & set(receipt.ids.get(kind, [])) for kind in NAMED):
            return receipt
    return None


def _says_all(content: str, terms: Iterable[Term]) -> bool:
    lower = content.lower()
    return all(
        (t.text in lower)
        if t.kind == "bigram"
        else re.search(rf"(?<!\w){re.escape(t.text)}(?!\w)", lower) is not None
        for t in terms
    )


def _narrowed(rows: QuerySet[Any], terms: list[Term], *columns: str) -> QuerySet[Any]:
    """Rows whose columns may say every term: SQL's case-insensitive LIKE on both engines
    for ASCII words and Chinese bigrams (SQLite's LIKE folds ASCII only); `_says_all` decides."""
    for term in terms:
        if term.text.isascii() or term.kind == "bigram":
            condition = Q()
            for column in columns:
                condition |= Q(**{f"{column}__icontains": term.text})
            rows = rows.filter(condition)
    return rows


def _matching(rows: QuerySet[Any], terms: list[Term]) -> list[int]:
    return sorted(
        pk
        for pk, content in _narrowed(rows, terms, "content").values_list("pk", "content")
        if _says_all(content, terms)
    )


def _matching_history(agent_id: str, terms: list[Term]) -> list[int]:
    """History rows whose text before or after, or a text they note (a merge's proposed
    text, a deleted memory's fields), says every term: of any memory of the agent."""
    rows = LongTermMemoryHistory.objects.filter(agent_id=agent_id)
    return sorted(
        row.pk
        for row in rows.iterator()
        if _says_all(
            " ".join(
                str(value)
                for value in (row.old_content, row.new_content, row.changes, row.old_values)
                if value
            ),
            terms,
        )
    )


def _items(ids: dict[str, list[int]], marks: list[str]) -> list[PreviewItem]:
    items = []
    for kind, model in (
        ("messages", MainMessage),
        ("summaries", ShortTermMemory),
        ("memories", LongTermMemory),
    ):
        rows = model.objects.filter(pk__in=ids[kind][:PREVIEW_ITEMS]).order_by("pk")
        for row in rows:
            items.append(
                PreviewItem(
                    kind=kind,
                    id=row.pk,
                    session_id=row.source_session if kind == "memories" else row.session_id,
                    parts=text.snippet(row.content, marks, width=160),
                )
            )
    return items
