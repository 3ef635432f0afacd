"""Searching an agent's messages: lexical (FTS5 BM25), vector (sqlite-vec KNN) or hybrid.

Hybrid fuses the two ranked lists; every hit keeps its component scores and ranks so a
result can be explained. Without usable vectors, vector and hybrid searches answer
lexically and say why in `degraded`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from memory import index
from memory.embeddings import Embedder
from memory.index import Filter, Hit
from memory.models import MainMessage
from memory.text import folded
from memory.validation import InvalidInput
from memory.vectors import QueryEmbedding, query_embedding

MODES = ("lexical", "vector", "hybrid")
# The most hits one search returns (the API's `k`).
MAX_K = 100
# Each list contributes this many candidates (at least) to the fusion.
POOL = 50
RRF_K = 60
# How recent a message repeating the query must be to count as the caller's own question.
ECHO_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True)
class SearchHit:
    message: MainMessage
    score: float
    lexical_score: float | None  # BM25, higher is better
    vector_score: float | None  # cosine similarity
    lexical_rank: int | None  # 1-based
    vector_rank: int | None


@dataclass(frozen=True)
class SearchResult:
    mode: str  # the mode that produced the hits
    hits: list[SearchHit]
    degraded: list[str]


@dataclass(frozen=True)
class Ranked:
    """A candidate with its place in each list; both scores are higher-is-better."""

    id: int
    lexical: float | None = None
    lexical_rank: int | None = None
    vector: float | None = None  # cosine similarity
    vector_rank: int | None = None


def _min_max(values: list[float]) -> list[float]:
    """Scores scaled to 0-1, an outlier at the top clipped to 1.

    With the plain maximum as the top, one outlier (a message that repeats the query word for
    word) takes 1.0 and squashes every other score toward 0, so the fused order became the
    vector order: on our Chinese set with MiniLM, recall fell once the question was stored.
    The top of the scale is therefore at most the second best plus its distance from the
    lowest: without an outlier this is plain min-max (same recall on LoCoMo), with one the
    others keep their spread (docs/EVALUATION.md, "The question stored first, and fusion").
    """
    ordered = sorted(values, reverse=True)
    low = ordered[-1]
    high = min(ordered[0], 2 * ordered[1] - low) if len(ordered) > 1 else ordered[0]
    return [1.0 if high == low else min(1.0, (v - low) / (high - low)) for v in values]


def fuse_rrf(candidates: list[Ranked]) -> dict[int, float]:
    """Reciprocal rank fusion: sum of 1 / (60 + rank) over the lists a hit appears in."""
    return {
        c.id: sum(1 / (RRF_K + rank) for rank in (c.lexical_rank, c.vector_rank) if rank)
        for c in candidates
    }


def fuse_weighted(candidates: list[Ranked], vector_weight: float = 0.3) -> dict[int, float]:
    """Min-max normalised scores of each list (see `_min_max`), 30% vector + 70% lexical; a
    missing score is 0.

    On LoCoMo this beat rank fusion, z-scores, BM25 saturation and the 70% vector / 30%
    lexical split of the design notes (docs/EVALUATION.md, "Results").
    """
    scores = {c.id: 0.0 for c in candidates}
    for weight, part in ((vector_weight, "vector"), (1 - vector_weight, "lexical")):
        present = [c for c in candidates if getattr(c, part) is not None]
        if not present:
            continue
        raw = [getattr(c, part) for c in present]
        for c, value in zip(present, _min_max(raw), strict=True):
            scores[c.id] += weight * value
    return scores


FUSIONS: dict[str, Callable[[list[Ranked]], dict[int, float]]] = {
    "rrf": fuse_rrf,
    "weighted": fuse_weighted,
}


def _merge(lexical: list[Hit], vector: list[Hit]) -> list[Ranked]:
    merged: dict[int, Ranked] = {}
    for rank, hit in enumerate(lexical, 1):
        merged[hit.id] = Ranked(hit.id, lexical=hit.score, lexical_rank=rank)
    for rank, hit in enumerate(vector, 1):
        seen = merged.get(hit.id, Ranked(hit.id))
        merged[hit.id] = Ranked(hit.id, seen.lexical, seen.lexical_rank, hit.score, rank)
    return list(merged.values())


def _scores(candidates: list[Ranked], mode: str, fusion: str) -> dict[int, float]:
    if mode == "hybrid":
        return FUSIONS[fusion](candidates)
    part = "vector" if mode == "vector" else "lexical"
    return {c.id: getattr(c, part) for c in candidates}


def _utc(moment: datetime) -> datetime:
    """The moment in UTC; a naive one is taken as UTC already, as the database keeps times."""
    if moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidInput(
            "since and until must stay within years 1 to 9999 once converted to UTC"
        ) from exc


def _stored_time(moment: datetime) -> datetime:
    """A UTC moment as main_messages.timestamp holds it: naive UTC text, which SQLite
    compares as text, so an offset left on the value would be compared as characters."""
    return moment.replace(tzinfo=None)


def _epoch_seconds(moment: datetime) -> int:
    """A UTC moment as the vector index holds it (vec0's created_at)."""
    return int(moment.timestamp())


def _filters(
    role: str | None,
    msg_type: str | None,
    since: datetime | None,
    until: datetime | None,
    *,
    time_column: str,
    time_value: Callable[[datetime], Any],
) -> list[Filter]:
    """The search's filters for one index; each names its time column its own way."""
    filters = []
    if role is not None:
        filters.append(Filter("role", "=", role))
    if msg_type is not None:
        filters.append(Filter("msg_type", "=", msg_type))
    if since is not None:
        filters.append(Filter(time_column, ">=", time_value(since)))
    if until is not None:
        filters.append(Filter(time_column, "<=", time_value(until)))
    return filters


def search(
    *,
    agent_id: str,
    query: str,
    mode: str = "hybrid",
    k: int = 10,
    session_id: str | None = None,
    role: str | None = None,
    msg_type: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_ids: Collection[int] = (),
    exclude_session: str | None = None,
    embedder: Embedder | None = None,
    embedded: QueryEmbedding | None = None,
    drop_echoes: bool = True,
    fusion: str = "weighted",
    now: datetime | None = None,
) -> SearchResult:
    """The agent's k best messages for the query; sub-agent transcripts are never searched.

    `exclude_ids` and `exclude_session` are left out before the lists are fused, so that the
    caller's own messages (the question it just stored) neither take places nor reshape the
    scores of the others. Without them, `drop_echoes` leaves out a message just stored with
    the query's text (`_without_echoes`); the context names its own messages instead.
    `embedded` is the query's vector when the caller has it already.
    """
    if mode not in MODES:
        raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
    if not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be between 1 and {MAX_K}")
    # One instant for both indexes, whatever offset it was given with.
    since = None if since is None else _utc(since)
    until = None if until is None else _utc(until)
    # One more than needed: the caller's own question may be among them (`_without_echoes`).
    pool = (max(k, POOL) if mode == "hybrid" else k) + 1
    degraded: list[str] = []
    vectors: list[Hit] = []
    if mode != "lexical":
        embedded = embedded or query_embedding(query, embedder)
        if embedded.vector is None:
            degraded.append(str(embedded.reason))
            mode = "lexical"
        else:
            vectors = _vector_hits(
                agent_id,
                embedded.vector,
                pool,
                exclude_ids,
                exclude_session,
                session_id,
                _filters(
                    role,
                    msg_type,
                    since,
                    until,
                    time_column="created_at",
                    time_value=_epoch_seconds,
                ),
            )
    lexical: list[Hit] = []
    if mode != "vector":
        filters = _filters(
            role, msg_type, since, until, time_column="timestamp", time_value=_stored_time
        )
        if exclude_session is not None:
            filters.append(Filter("session_id", "!=", exclude_session))
        lexical = index.lexical_search(
            index.MESSAGE_TEXT,
            agent_id=agent_id,
            query=query,
            k=pool,
            session_id=session_id,
            filters=filters,
            exclude=exclude_ids,
            now=now or timezone.now(),
        )
    candidates = _merge(lexical, vectors)
    if drop_echoes:
        candidates = _without_echoes(candidates, query)
    scores = _scores(candidates, mode, fusion)
    best = sorted(candidates, key=lambda c: (-scores[c.id], c.id))[:k]
    messages = MainMessage.objects.filter(agent_id=agent_id).in_bulk([c.id for c in best])
    hits = [
        SearchHit(
            message=messages[c.id],
            score=scores[c.id],
            lexical_score=c.lexical,
            vector_score=c.vector,
            lexical_rank=c.lexical_rank,
            vector_rank=c.vector_rank,
        )
        for c in best
        if c.id in messages  # a vector whose message was deleted meanwhile
    ]
    return SearchResult(mode=mode, hits=hits, degraded=degraded)


def search_agents(
    *, agent_ids: Sequence[str], query: str, mode: str = "hybrid", k: int = 10, **filters: Any
) -> SearchResult:
    """`search` over several agents (the dashboard's search of all agents): each agent is
    searched alone, as every index is scoped to one, and the hits are ordered by their score
    in their own agent's search, the best k kept. A person searching wants every message, so
    none is dropped as an echo."""
    hits: list[SearchHit] = []
    modes: set[str] = set()
    degraded: list[str] = []
    for agent_id in agent_ids:
        result = search(
            agent_id=agent_id, query=query, mode=mode, k=k, drop_echoes=False, **filters
        )
        hits += result.hits
        modes.add(result.mode)
        degraded += [reason for reason in result.degraded if reason not in degraded]
    hits.sort(key=lambda hit: (-hit.score, hit.message.pk))
    answered = modes.pop() if len(modes) == 1 else ("mixed" if modes else mode)
    return SearchResult(mode=answered, hits=hits[:k], degraded=degraded)


def _without_echoes(candidates: list[Ranked], query: str) -> list[Ranked]:
    """Leave out the caller's own question: a message stored in the last minutes whose text
    is the query itself. An agent stores the user's message, then searches with it; that
    message would take the first place and tell the agent nothing it does not know."""
    since = timezone.now() - ECHO_WINDOW
    recent = MainMessage.objects.filter(
        pk__in=[c.id for c in candidates], timestamp__gte=since
    ).values_list("pk", "content")
    echoes = {pk for pk, content in recent if folded(content) == folded(query)}
    return [c for c in candidates if c.id not in echoes]


def _vector_hits(
    agent_id: str,
    vector: tuple[float, ...],
    k: int,
    exclude_ids: Collection[int],
    exclude_session: str | None,
    session_id: str | None,
    filters: list[Filter],
) -> list[Hit]:
    """KNN over the agent's message vectors; excluded ids are fetched beyond k, then dropped
    (vec0 cannot filter on its primary key)."""
    if session_id is not None:
        filters.append(Filter("session_id", "=", session_id))
    if exclude_session is not None:
        filters.append(Filter("session_id", "!=", exclude_session))
    hits = index.knn(
        index.MESSAGE_VECTORS,
        agent_id=agent_id,
        embedding=vector,
        k=min(k + len(exclude_ids), index.KNN_MAX_K),
        filters=filters,
    )
    return [hit for hit in hits if hit.id not in exclude_ids][:k]
