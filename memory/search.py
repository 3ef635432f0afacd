"""Searching an agent's messages: lexical (FTS5 BM25), vector (sqlite-vec KNN) or hybrid.

Hybrid fuses the two ranked lists; every hit keeps its component scores and ranks so a
result can be explained. Without usable vectors, vector and hybrid searches answer
lexically and say why in `degraded`. A hybrid search (the default, and the context's
recall) also raises what words and meaning miss, saying so in each hit's `raised`: the
messages of a period the query names, those that tell of their own day when it asks when,
and the person's words that answer it, known from their long-term memories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal, get_args

from django.utils import timezone
from django.utils.translation import gettext_noop

from memory import index
from memory.dates import Period, find_periods, tells_of_its_day
from memory.extraction import sentences, speaks_for_a_person
from memory.index import Filter, Hit
from memory.memories import current_value, memories_about
from memory.models import LongTermMemory, MainMessage, Role
from memory.questions import (
    asks_about_replies,
    asks_every_mention,
    asks_when,
    is_recommendation,
)
from memory.relevance import RECOMMENDATION_TYPES
from memory.text import folded
from memory.validation import InvalidInput
from memory.vectors import QueryEmbedding, query_embedding

Mode = Literal["hybrid", "lexical", "vector"]
# The one list of the search modes, hybrid (the default) first: the API's and MCP's schemas
# (`Mode`), the dashboard's form and eval_locomo's --mode take them from here.
MODES: tuple[str, ...] = get_args(Mode)
# The most hits one search returns (the API's `k`).
MAX_K = 100
# Each list contributes this many candidates (at least) to the fusion.
POOL = 50
# How recent a message repeating the query must be to count as the caller's own question.
ECHO_WINDOW = timedelta(minutes=10)
# The agent's own replies run to hundreds of words and say many words of any query: ranked by
# words and meaning alone they held 44% of the top 10 on agent_sessions, whose questions ask
# what the person said. They count at this share of their score, unless the query asks what
# the agent said (memory.questions.asks_about_replies). A reply by a named person (LoCoMo's
# second speaker) is a person's words and keeps its score.
REPLY_WEIGHT = 0.6
# A message of the person's that only asks ("Any tips for studying for my AWS exam?", every
# sentence a question) tells nothing of them, yet says the words of a question about its
# topic: it counts at this share too, unless the query asks about what was said between them
# (asks_about_replies: "What did I ask you about..."). agent_sessions search @10 (question
# stored) 0.913 -> 0.923, @5 0.781 -> 0.881; LoCoMo, the Chinese, cross-language and
# agent_style sets' search the same at @10; LoCoMo's context at 2048 0.825 -> 0.826.
ASKING_WEIGHT = 0.6
QUESTION_MARKS = ("?", "？")
# A question that names a period ("How many times did I order takeout in March?", "last
# month", 上个月, 三月份: memory.dates.find_periods) is about the messages of that time: a
# candidate whose day is in the period is raised by this share of the best score. Raised,
# never required: a period that holds no candidate changes nothing (conversations imported
# from the past are asked about long after).
PERIOD_BOOST = 0.3
# A message tells of the days just before it ("yesterday", "on Saturday"): one dated up to
# three days after a period may be about it (on LoCoMo's questions naming a period, at 4,096:
# none 64 evidence turns, three days 65, a week 64).
TOLD_WITHIN = timedelta(days=3)
# A question asking when something happened (memory.questions.asks_when) is answered by the
# message that told of it on its day ("I sat the exam this morning"): a candidate that names
# a day (memory.dates: today, yesterday, 昨天...) is raised by this share of the best score.
DAY_BOOST = 0.3
# What the person said that answers the question, known from their long-term memories,
# though its words and its vector may be far from the question's: for a question asking for
# one of their attributes ("What do I do for a living?", memory.attributes) the message its
# current value was said in ("I'm a data engineer at a bank"); for a recommendation ("Can
# you recommend a gift?") the messages of the preferences and facts it must respect ("I'd
# rather make something than buy it"). Raised by this share of the best score: above every
# other candidate, whose share is at most 1, with PERIOD_BOOST and DAY_BOOST.
SAID_BOOST = 2.0
# A question asking to count or list what the person told of ("Which books have I finished
# reading?", 我去了几次..., memory.questions.asks_every_mention) needs every mention, and the
# person's memories about it hold them one statement each, sharper than the message that said
# it in passing ("I just finished reading Educated, by the way" after a question about jet
# lag): the messages they came from are raised by this share of the best score. For every
# question it cost LoCoMo's context at 2048 0.825 -> 0.751 (its two speakers' memories
# crowded the budget); agent_sessions search @10 0.841 -> 0.872 at 0.6, 0.856 at 0.3.
REMEMBERED_BOOST = 0.6
# Why a hit was raised, in the API's words (the dashboard translates them).
IN_THE_PERIOD = gettext_noop("said in the period the query names")
OF_ITS_DAY = gettext_noop("tells of its own day, and the query asks when")
SAID_BY_THE_PERSON = gettext_noop("the person's words that answer it, known from a memory")
REMEMBERED = gettext_noop("said what a memory about the query holds")


@dataclass(frozen=True)
class SearchQuery:
    """What a search is asked, built once where the request comes in (the API's and MCP's
    `SearchFilters.asked`, the dashboard's `SearchForm.search`, the context's recall) and never
    changed on the way: the text, the mode, how many hits, and which messages count.

    `since` and `until` are included, with any offset (a naive time is UTC). `exclude_ids`
    and `exclude_session` are left out before the lists are fused, so that the caller's own
    messages (the question it just stored) neither take places nor reshape the scores of the
    others. Without them, `drop_echoes` leaves out a message just stored with the query's
    text (`_without_echoes`); the context names its own messages instead, and a person
    searching the dashboard wants every message.
    """

    text: str
    mode: str = "hybrid"
    k: int = 10
    session_id: str | None = None
    role: str | None = None
    msg_type: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude_ids: frozenset[int] = frozenset()
    exclude_session: str | None = None
    drop_echoes: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}")
        if not 1 <= self.k <= MAX_K:
            raise InvalidInput(f"k must be between 1 and {MAX_K}")


@dataclass(frozen=True)
class SearchHit:
    message: MainMessage
    score: float
    lexical_score: float | None  # BM25, higher is better
    vector_score: float | None  # cosine similarity
    lexical_rank: int | None  # 1-based
    vector_rank: int | None
    raised: tuple[str, ...] = ()  # why: IN_THE_PERIOD, OF_ITS_DAY, SAID_BY_THE_PERSON


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


# Scores of a hybrid search's candidates from their places in both lists, by message id.
Fusion = Callable[[Sequence[Ranked]], dict[int, float]]


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


def fuse_weighted(candidates: Sequence[Ranked], vector_weight: float = 0.35) -> dict[int, float]:
    """Min-max normalised scores of each list (see `_min_max`), 35% vector + 65% lexical; a
    missing score is 0: the search's fusion. Every lexical candidate has its similarity too
    (`_with_similarities`); a vector candidate that says none of the query's words has no
    lexical score.

    On LoCoMo this beat rank fusion, z-scores, BM25 saturation and the 70% vector / 30%
    lexical split of the design notes (docs/EVALUATION.md, "What we tried"); 35% rather than
    30% once every candidate had its similarity ("The question stored first, and fusion").
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


@dataclass(frozen=True)
class Candidates:
    """What the indexes found for a query, each message with its place in each list, before
    they are scored and cut to the best k (`best`)."""

    agent_id: str
    mode: str  # the mode that answers: lexical when vectors could not be used
    k: int
    ranked: tuple[Ranked, ...]
    degraded: tuple[str, ...]
    replies_weighed: bool  # the agent's replies count at REPLY_WEIGHT, asking at ASKING_WEIGHT
    periods: tuple[Period, ...] = ()  # the periods the query names
    said: frozenset[int] = frozenset()  # the person's messages that answer it (SAID_BOOST)
    remembered: frozenset[int] = frozenset()  # where memories about it came from
    when: bool = False  # the query asks when something happened (DAY_BOOST)

    def best(self, fuse: Fusion) -> SearchResult:
        """The best k, hybrid candidates scored by `fuse`, the others by their one score."""
        if self.mode == "hybrid":
            scores = fuse(self.ranked)
        else:
            part = "vector" if self.mode == "vector" else "lexical"
            scores = {c.id: getattr(c, part) or 0.0 for c in self.ranked}
        # Every candidate read in one query, for the weighing, the raises and the hits: a
        # context's search keeps half of them or more (its k is 100; each index brings 101).
        messages = MainMessage.objects.filter(agent_id=self.agent_id).in_bulk(list(scores))
        if self.replies_weighed:
            for pk, message in messages.items():
                if _agent_reply(message):
                    scores[pk] = _weighed(scores[pk], REPLY_WEIGHT)
                elif _only_asks(message):
                    scores[pk] = _weighed(scores[pk], ASKING_WEIGHT)
        raises = self._raises(messages.values())
        if raises:
            scores = raises.applied(scores)
        best = sorted(self.ranked, key=lambda c: (-scores[c.id], c.id))[: self.k]
        hits = [
            SearchHit(
                message=messages[c.id],
                score=scores[c.id],
                lexical_score=c.lexical,
                vector_score=c.vector,
                lexical_rank=c.lexical_rank,
                vector_rank=c.vector_rank,
                raised=raises.why(c.id),
            )
            for c in best
            if c.id in messages  # a vector whose message was deleted meanwhile
        ]
        return SearchResult(mode=self.mode, hits=hits, degraded=list(self.degraded))

    def _raises(self, messages: Iterable[MainMessage]) -> Raises:
        """Which candidates are of a period the query names, or tell of their own day for a
        question asking when."""
        in_period, of_its_day = set(), set()
        for message in messages if self.periods or self.when else ():
            when = message.timestamp
            if any(p.holds(when) or p.holds(when - TOLD_WITHIN) for p in self.periods):
                in_period.add(message.pk)
            if self.when and tells_of_its_day(message.content):
                of_its_day.add(message.pk)
        return Raises(frozenset(in_period), frozenset(of_its_day), self.said, self.remembered)


@dataclass(frozen=True)
class Raises:
    """The candidates a hybrid search raises above their words and meaning, by why."""

    in_period: frozenset[int]  # PERIOD_BOOST
    of_its_day: frozenset[int]  # DAY_BOOST
    said: frozenset[int]  # SAID_BOOST
    remembered: frozenset[int]  # REMEMBERED_BOOST

    def __bool__(self) -> bool:
        return bool(self.in_period or self.of_its_day or self.said or self.remembered)

    def applied(self, scores: dict[int, float]) -> dict[int, float]:
        """Scores as shares of the best (the same scale for every mode: BM25 has none), plus
        each candidate's raises."""
        best = max(scores.values(), default=0.0)
        scale = best if best > 0 else 1.0
        return {pk: score / scale + self._boost(pk) for pk, score in scores.items()}

    def _boost(self, pk: int) -> float:
        return (
            PERIOD_BOOST * (pk in self.in_period)
            + DAY_BOOST * (pk in self.of_its_day)
            + SAID_BOOST * (pk in self.said)
            + REMEMBERED_BOOST * (pk in self.remembered)
        )

    def why(self, pk: int) -> tuple[str, ...]:
        reasons = (
            (IN_THE_PERIOD, self.in_period),
            (OF_ITS_DAY, self.of_its_day),
            (SAID_BY_THE_PERSON, self.said),
            (REMEMBERED, self.remembered),
        )
        return tuple(reason for reason, raised in reasons if pk in raised)


def _agent_reply(message: MainMessage) -> bool:
    """Whether the message is the agent's own reply (not a named person's words)."""
    return message.role == Role.ASSISTANT and not speaks_for_a_person(message)


def _only_asks(message: MainMessage) -> bool:
    """Whether every sentence of the message is a question."""
    text = message.content.rstrip()
    # Most messages end otherwise: only these are split into sentences.
    if not text.endswith(QUESTION_MARKS):
        return False
    return all(sentence.endswith(QUESTION_MARKS) for sentence in sentences(text))


def _weighed(score: float, weight: float) -> float:
    """A score lowered by a weight, on either side of zero (a cosine may be negative)."""
    return score * weight if score > 0 else score / weight


def _merge(lexical: list[Hit], vector: list[Hit], raised: Iterable[int]) -> list[Ranked]:
    """Each candidate once with its place in each list; a message the person's memories point
    to (`_from_memories`) is one even when neither list found it."""
    merged: dict[int, Ranked] = {}
    for rank, hit in enumerate(lexical, 1):
        merged[hit.id] = Ranked(hit.id, lexical=hit.score, lexical_rank=rank)
    for rank, hit in enumerate(vector, 1):
        seen = merged.get(hit.id, Ranked(hit.id))
        merged[hit.id] = Ranked(hit.id, seen.lexical, seen.lexical_rank, hit.score, rank)
    for pk in raised:
        merged.setdefault(pk, Ranked(pk))
    return list(merged.values())


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
    query: SearchQuery,
    since: datetime | None,
    until: datetime | None,
    *,
    time_column: str,
    time_value: Callable[[datetime], Any],
) -> tuple[Filter, ...]:
    """The query's filters for one index, each index naming its time column its own way; the
    session's, which the indexes take differently, are the caller's."""
    wanted = (
        ("role", "=", query.role),
        ("msg_type", "=", query.msg_type),
        (time_column, ">=", None if since is None else time_value(since)),
        (time_column, "<=", None if until is None else time_value(until)),
    )
    return tuple(Filter(column, op, value) for column, op, value in wanted if value is not None)


def _without_session(query: SearchQuery) -> tuple[Filter, ...]:
    if query.exclude_session is None:
        return ()
    return (Filter("session_id", "!=", query.exclude_session),)


@dataclass(frozen=True)
class TextSearch:
    """A search's text query, started before the caller's other work (`start_text_search`)."""

    agent_id: str
    query: SearchQuery
    now: datetime
    hits: Callable[[], list[Hit]]  # waits for them where the query runs beside the caller


def start_text_search(*, agent_id: str, query: SearchQuery, now: datetime) -> TextSearch:
    """The query's text search, started: on PostgreSQL it runs beside the caller's work
    (index.started), so that a caller with more to do first (the context's
    layers before its recall) starts it early."""
    since, until = _since_until(query)
    filters = _filters(query, since, until, time_column="timestamp", time_value=_stored_time)
    search = partial(
        index.lexical_search,
        index.MESSAGE_TEXT,
        agent_id=agent_id,
        query=query.text,
        k=_pool(query),
        session_id=query.session_id,
        filters=(*filters, *_without_session(query)),
        exclude=query.exclude_ids,
        now=now,
    )
    return TextSearch(agent_id, query, now, index.started(search))


def search(
    *,
    agent_id: str,
    query: SearchQuery,
    embedded: QueryEmbedding | None = None,
    now: datetime | None = None,
    about: Sequence[LongTermMemory] | None = None,
    text: TextSearch | None = None,
) -> SearchResult:
    """The agent's best messages for the query, hybrid candidates fused by `fuse_weighted`;
    sub-agent transcripts are never searched.

    `embedded` is the query's vector when the caller has it already (the context's recall);
    `now` is when relative dates in the query count from (the context's one clock; the time
    of the call otherwise); `about` the memories about the query (`memories.memories_about`)
    when the caller judged them already (the context's long-term layer); `text` its text
    search when the caller started it (`start_text_search`), taken if it was started for
    this agent, query and time.
    """
    found = candidates(
        agent_id=agent_id, query=query, embedded=embedded, now=now, about=about, text=text
    )
    return found.best(fuse_weighted)


def _since_until(query: SearchQuery) -> tuple[datetime | None, datetime | None]:
    """The query's bounds as UTC instants, one for both indexes, whatever offset it was given
    with."""
    since = None if query.since is None else _utc(query.since)
    until = None if query.until is None else _utc(query.until)
    return since, until


def _pool(query: SearchQuery) -> int:
    """How many hits each index brings. One more than needed: the caller's own question may
    be among them (`_without_echoes`). Replies weighed: each list brings a pool, so that the
    person's words can move up."""
    weighed = not asks_about_replies(query.text)
    return (max(query.k, POOL) if query.mode == "hybrid" or weighed else query.k) + 1


def candidates(
    *,
    agent_id: str,
    query: SearchQuery,
    embedded: QueryEmbedding | None = None,
    now: datetime | None = None,
    about: Sequence[LongTermMemory] | None = None,
    text: TextSearch | None = None,
) -> Candidates:
    """`search` before its fusion: the candidates of both indexes, merged. The evaluation calls
    it to compare other fusions (bench.evaluation.FUSIONS)."""
    since, until = _since_until(query)
    weighed = not asks_about_replies(query.text)
    pool = _pool(query)
    mode = query.mode
    degraded: list[str] = []
    vectors: list[Hit] = []
    query_vector: tuple[float, ...] | None = None
    embedding: QueryEmbedding | None = None
    at = now or timezone.now()  # relative days and periods count from one instant
    if text is not None and (text.agent_id, text.query, text.now) != (agent_id, query, at):
        text = None  # started for another query: the context's working memory was cut
    if text is None and mode != "vector":
        text = start_text_search(agent_id=agent_id, query=query, now=at)  # beside the KNN
    if mode != "lexical":
        embedding = embedded or query_embedding(query.text)
        query_vector = embedding.vector
        if query_vector is None:
            degraded.append(embedding.reason or "")  # a Phrase: the dashboard translates it
            mode = "lexical"
        else:
            vectors = _vector_hits(
                agent_id,
                query_vector,
                pool,
                query,
                _filters(query, since, until, time_column="created_at", time_value=_epoch_seconds),
            )
    lexical: list[Hit] = []
    if mode != "vector":  # hybrid or lexical asked, or lexical when vectors could not answer
        lexical = (text or start_text_search(agent_id=agent_id, query=query, now=at)).hits()
    hybrid = query.mode == "hybrid"
    said, remembered = frozenset[int](), frozenset[int]()
    if hybrid:
        said, remembered = _from_memories(agent_id, query, since, until, at, embedding, about)
    ranked = _merge(lexical, vectors, said | remembered)
    if query.drop_echoes:
        ranked = _without_echoes(ranked, query.text)
    if mode == "hybrid" and query_vector is not None:
        ranked = _with_similarities(ranked, agent_id, query_vector)
    periods = tuple(find_periods(query.text, now=at)) if hybrid else ()
    return Candidates(
        agent_id,
        mode,
        query.k,
        tuple(ranked),
        tuple(degraded),
        weighed,
        periods,
        said,
        remembered,
        hybrid and asks_when(query.text),
    )


def _from_memories(
    agent_id: str,
    query: SearchQuery,
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    embedding: QueryEmbedding | None,
    judged: Sequence[LongTermMemory] | None,
) -> tuple[frozenset[int], frozenset[int]]:
    """The person's messages their memories point to, as far as the query's filters admit
    them: those that answer the query (SAID_BOOST: where the current value of the attribute it
    asks for was said, `memories.current_value`, or the preferences and facts a recommendation
    must respect), and for a question asking for every mention where its memories came from
    (REMEMBERED_BOOST). The memories about the query are `judged` when the caller has them."""
    if asks_about_replies(query.text):
        # Asked what it said or advised ("你建议我怎么热身？"), the agent's replies answer.
        return frozenset(), frozenset()
    said = [current_value(agent_id, query.text, now)]
    about: Sequence[LongTermMemory] = ()
    recommending, every = is_recommendation(query.text), asks_every_mention(query.text)
    if embedding is not None and embedding.vector is not None and (recommending or every):
        vector, thresholds = embedding.vector, embedding.thresholds
        about = judged
        if about is None:
            about = memories_about(agent_id, query.text, vector, thresholds, now, recommending)
    if recommending:
        said += [memory for memory in about if memory.memory_type in RECOMMENDATION_TYPES]
    answers = _sources(
        agent_id, [memory for memory in said if memory is not None], query, since, until
    )
    if not every:
        return answers, frozenset()
    return answers, _sources(agent_id, about, query, since, until) - answers


def _sources(
    agent_id: str,
    memories: list[LongTermMemory],
    query: SearchQuery,
    since: datetime | None,
    until: datetime | None,
) -> frozenset[int]:
    """The messages the memories came from, as far as the query's filters admit them."""
    if not memories:
        return frozenset()
    messages = MainMessage.objects.filter(agent_id=agent_id, memory_sources__memory__in=memories)
    wanted = {
        "role": query.role,
        "msg_type": query.msg_type,
        "session_id": query.session_id,
        "timestamp__gte": since,
        "timestamp__lte": until,
    }
    messages = messages.filter(**{field: v for field, v in wanted.items() if v is not None})
    if query.exclude_session is not None:
        messages = messages.exclude(session_id=query.exclude_session)
    return frozenset(messages.exclude(pk__in=query.exclude_ids).values_list("pk", flat=True))


def search_agents(*, agent_ids: Sequence[str], query: SearchQuery) -> SearchResult:
    """`search` over several agents (the dashboard's search of all agents): each agent is
    searched alone, as every index is scoped to one, and the hits are ordered by their score
    in their own agent's search, the best k kept."""
    hits: list[SearchHit] = []
    modes: set[str] = set()
    degraded: list[str] = []
    for agent_id in agent_ids:
        result = search(agent_id=agent_id, query=query)
        hits += result.hits
        modes.add(result.mode)
        degraded += [reason for reason in result.degraded if reason not in degraded]
    hits.sort(key=lambda hit: (-hit.score, hit.message.pk))
    answered = modes.pop() if len(modes) == 1 else ("mixed" if modes else query.mode)
    return SearchResult(mode=answered, hits=hits[: query.k], degraded=degraded)


def _with_similarities(
    ranked: list[Ranked], agent_id: str, vector: tuple[float, ...]
) -> list[Ranked]:
    """Each lexical candidate beyond the KNN's k given its similarity to the query (its rank
    in the vector list stays empty), so that every candidate is fused, and judged by the
    context's relevance floor, on the same scale."""
    missing = [c.id for c in ranked if c.vector is None]
    found = {
        hit.id: hit.score
        for hit in index.similarities(
            index.MESSAGE_VECTORS, agent_id=agent_id, embedding=vector, row_ids=missing
        )
    }
    return [replace(c, vector=found[c.id]) if c.id in found else c for c in ranked]


def _without_echoes(ranked: list[Ranked], query: str) -> list[Ranked]:
    """Leave out the caller's own question: a message stored in the last minutes whose text
    is the query itself. An agent stores the user's message, then searches with it; that
    message would take the first place and tell the agent nothing it does not know."""
    since = timezone.now() - ECHO_WINDOW
    recent = MainMessage.objects.filter(
        pk__in=[c.id for c in ranked], timestamp__gte=since
    ).values_list("pk", "content")
    echoes = {pk for pk, content in recent if folded(content) == folded(query)}
    return [c for c in ranked if c.id not in echoes]


def _vector_hits(
    agent_id: str,
    vector: tuple[float, ...],
    k: int,
    query: SearchQuery,
    filters: tuple[Filter, ...],
) -> list[Hit]:
    """KNN over the agent's message vectors; excluded ids are fetched beyond k, then dropped
    (vec0 cannot filter on its primary key)."""
    session = () if query.session_id is None else (Filter("session_id", "=", query.session_id),)
    hits = index.knn(
        index.MESSAGE_VECTORS,
        agent_id=agent_id,
        embedding=vector,
        k=min(k + len(query.exclude_ids), index.KNN_MAX_K),
        filters=(*filters, *session, *_without_session(query)),
    )
    return [hit for hit in hits if hit.id not in query.exclude_ids][:k]
