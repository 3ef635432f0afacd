"""Consolidation, run by background tasks: a session's summaries and messages become typed
long-term memories.

At session end or every 20 turns, the session is consolidated; an extracted memory close to an
existing memory of the agent (`_duplicate_of`) updates it instead of duplicating it, keeping the
text when a person curated it. One that says the closest memory's value changed ("I moved to
Berlin" after "I live in Paris") becomes a new memory that supersedes it (memory.supersession's
conservative rule; with a chat model, the model chooses add, update, supersede or ignore for
each item against its closest memories, and the rules decide when it fails).

An agent is consolidated at most once every 30 seconds: a request inside that window is
deferred to its end, never dropped. Each run covers what the session said since its last run,
and ends with the agent's cleanup (memory.cleanup).

With a chat model (`[llm]`, memory.llm) the model extracts memories from the turn summaries
(memory.summaries); without one, or when it fails (unreachable, or not the JSON asked for,
twice), a rule-based extractor reads the messages, so long-term memory fills on the default
setup. Each run records which path made it (`extractor`, with the reason).

Each memory made or confirmed gets the messages it came from as sources: the rules name the
message of each statement; the chat model names the summaries (numbered in the prompt), and
the memory gets the messages of their turns (all the run's summaries' turns when it names
none that exist; the run's messages when no turn is known).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from memory import attributes, embeddings, memories, scheduling, supersession, vectors
from memory.cleanup import cleanup
from memory.embeddings import EmbeddingError
from memory.extraction import MEMORY_CHARS, Extracted, extract_with_sources
from memory.llm import ChatClient, LLMError, configured_chat
from memory.models import (
    CONSOLIDATION,
    RUN_NOTE,
    WAITING,
    ConsolidationRun,
    LongTermMemory,
    MainMessage,
    MemoryAction,
    MemoryType,
    Role,
    RunStatus,
    ShortTermMemory,
    Trigger,
)
from memory.text import DUPLICATE_TEXT_SIMILARITY, statement_of, text_similarity

logger = logging.getLogger(__name__)

TURNS_PER_CONSOLIDATION = 20
CONSOLIDATION_WINDOW = timedelta(seconds=30)
# A run still "running" after this lost its worker (a crash mid-run): it is marked failed and
# no longer holds the agent's window; the session's next run covers its messages.
STALE_RUN = timedelta(minutes=10)
STARTED = (RunStatus.RUNNING, RunStatus.DONE, RunStatus.FAILED)
WINDOW_REASON = "the agent was consolidated less than 30 seconds ago: deferred to run_after"
BUSY_REASON = "another run of the agent is still going: deferred to run_after"
NOTHING_NEW_REASON = "nothing new since the session's last run"
INVALID_ANSWER_REASON = "the chat model's answer was not valid JSON, twice"
FELL_BACK = "the rules extracted instead"
STALE_REASON = "its worker stopped during the run"
REQUEUED_REASON = "its worker stopped during the run: queued again"
GIVEN_UP_REASON = "its worker stopped during the run, too often: not run again"
JOINED_REASON = "its worker stopped during the run: the session's waiting run covers it"
# Dedup compares an extracted item with this many of the agent's memories from each index
# (nearest vectors, best lexical matches), never with all of them.
DEDUP_CANDIDATES = 20
MERGE_CONFIDENCE_STEP = 0.1

# A JSON object, not an array: servers' JSON mode (response_format json_object) makes objects.
# Each summary is numbered ("1. ..."): "from" names the ones a memory came from.
EXTRACTION_PROMPT = """从下面的对话摘要中提取值得长期记住的信息（用户偏好、事实、决策、项目背景）。
只输出一个 JSON 对象，不要其他文字，格式：
{{"memories": [{{"type": "preference|fact|decision|project", "content": "一句话", "from": [1]}}]}}
"from" 是这条信息出自的摘要编号，可以有几个，如 [1, 3]。
没有值得记住的信息时输出 {{"memories": []}}。

摘要：
{summaries}"""

# --- extraction and deduplication ----------------------------------------------------------


@dataclass(frozen=True)
class Answered(Extracted):
    """A memory the chat model extracted, with the numbers of the summaries it says it came
    from (1 is the prompt's first); none when it named none, or a number no summary has."""

    summaries: tuple[int, ...] = ()


def _summary_numbers(named: Any, count: int) -> tuple[int, ...]:
    """The summaries an item's "from" names, if it is a list of the prompt's numbers."""
    if not isinstance(named, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= count for n in named
    ):
        return ()
    return tuple(sorted(set(named)))


def _parse_extraction(answer: str, count: int) -> list[Answered]:
    """The memories of an answer shaped as EXTRACTION_PROMPT asks for `count` summaries (text
    around the object, a code fence, is ignored); ValueError says what else is wrong. An item
    whose type is not a memory type, or whose content is blank, is left out; a "from" that is
    not the summaries' numbers names none (`Answered.summaries`)."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    document = json.loads(answer[start : end + 1])
    items = document.get("memories") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ValueError('no "memories" list in the answer')
    extracted = []
    for number, item in enumerate(items):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("type"), str)
            and isinstance(item.get("content"), str)
        ):
            raise ValueError(f'memories[{number}] is not {{"type": text, "content": text}}')
        kind, content = item["type"].strip(), item["content"].strip()
        if kind not in MemoryType.values:
            logger.info("Extraction: left out an item of type %r", kind[:40])
        elif content:
            numbers = _summary_numbers(item.get("from"), count)
            extracted.append(Answered(kind, content[:MEMORY_CHARS], numbers))
    return extracted


class InvalidAnswer(LLMError):
    """The chat model answered, twice, something other than the JSON asked for."""


def llm_extract(chat: ChatClient, summaries: list[str]) -> list[Answered]:
    """The chat model's extraction, asked again once when its answer is not the expected
    JSON; raises LLMError when the model fails (the client has retried already) and
    InvalidAnswer after a second bad answer."""
    numbered = "\n".join(f"{number}. {s}" for number, s in enumerate(summaries, start=1))
    prompt = EXTRACTION_PROMPT.format(summaries=numbered)
    for attempt in (1, 2):
        answer = chat.complete(prompt, json_object=True)
        try:
            return _parse_extraction(answer, len(summaries))
        except ValueError as exc:
            chat.usage.invalid_answer()
            logger.warning("Extraction answer %s was not the JSON asked for: %s", attempt, exc)
    raise InvalidAnswer(INVALID_ANSWER_REASON)


@dataclass(frozen=True)
class Sourced(Extracted):
    """An extracted memory with the ids of the messages it came from."""

    message_ids: tuple[int, ...] = ()


def _merge(run: ConsolidationRun, memory: LongTermMemory, item: Sourced) -> None:
    """A new extraction confirms the memory: confidence and source count go up, and its
    messages join the memory's sources. Its text becomes the newer wording, unless a person
    curated it: then the history keeps the proposal and the memory keeps the person's words."""
    confirmed = {
        "confidence": min(1.0, memory.confidence + MERGE_CONFIDENCE_STEP),
        "source_count": memory.source_count + 1,
        "source_messages": item.message_ids,
    }
    note: dict[str, Any] = {RUN_NOTE: run.pk}
    if not memory.curated:
        memories.memory_update(
            memory,
            actor=CONSOLIDATION,
            action=MemoryAction.MERGE,
            note=note,
            content=item.content,
            **confirmed,
        )
        return
    if item.content != memory.content:
        note |= {"proposed_content": item.content, "content_kept": "curated"}
    memories.memory_update(
        memory, actor=CONSOLIDATION, action=MemoryAction.MERGE, note=note, **confirmed
    )


Vector = tuple[float, ...]
Fresh = tuple[str, Vector]  # a memory this run created: its type and vector


@dataclass(frozen=True)
class Measures:
    """What the configured model's similarities mean for dedup and supersession."""

    duplicate: float = 1.0  # above this two memories say the same (1.0: no vectors)
    same_subject: float = 1.0  # above this two memories are about one subject


def _embed_items(items: list[Extracted]) -> tuple[list[Vector | None], Measures]:
    """The items' vectors, made before the write transaction (a provider may be slow), and
    what the model's similarities mean. None for each when vectors are unusable or the
    provider fails: text similarity decides alone, and the run goes on."""
    embedder = embeddings.configured_embedder()
    if not items or embedder is None or not vectors.vector_search_status(embedder).enabled:
        return [None] * len(items), Measures()
    # Without their labels (day, speaker): an update said "now" is dated, and the day made
    # "I moved to Berlin last month" 0.32 similar to "I live in Paris" instead of 0.415.
    texts = [statement_of(item.content)[: vectors.MAX_EMBED_CHARS] for item in items]
    try:
        found = embedder.embed(texts)
    except EmbeddingError as exc:
        logger.warning("Consolidation dedups by text only, the provider failed: %s", exc)
        return [None] * len(items), Measures()
    thresholds = embedder.thresholds
    covered = [embeddings.covers(embedder.signature, item.content) for item in items]
    return (
        [tuple(v) if ok else None for v, ok in zip(found, covered, strict=True)],
        Measures(thresholds.duplicate, thresholds.same_subject),
    )


def _cosine(a: Vector, b: Vector) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


@dataclass(frozen=True)
class Candidate:
    """A current memory of the item's type near it: its vector's cosine similarity (None
    when not among the nearest, or without vectors) and its text's (`text_similarity`)."""

    memory: LongTermMemory
    similarity: float | None
    text_similarity: float

    def margin(self, measures: Measures) -> float:
        """How far above the duplicate levels (positive: a duplicate)."""
        return max(
            (self.similarity if self.similarity is not None else -1.0) - measures.duplicate,
            self.text_similarity - DUPLICATE_TEXT_SIMILARITY,
        )

    def closeness(self) -> float:
        return max(self.similarity or 0.0, self.text_similarity)


def _candidates(
    agent_id: str, item: Extracted, vector: Vector | None, fresh: dict[int, Fresh]
) -> list[Candidate]:
    """The agent's current memories of the item's type that may repeat or update it, closest
    first, from a short list found through the index.

    With vectors, the nearest memories by cosine similarity; always, the best lexical
    matches by text similarity, which also finds memories not embedded yet (KNN cannot see
    them); and the memories this run created, by their vectors.
    """
    similarity: dict[int, float] = {}
    if vector is not None:
        near = memories.memories_like(
            agent_id=agent_id, vector=vector, k=DEDUP_CANDIDATES, memory_type=item.memory_type
        )
        similarity = {hit.id: hit.score for hit in near}
        for memory_id, (memory_type, created) in fresh.items():
            if memory_type == item.memory_type:
                similarity[memory_id] = _cosine(vector, created)
    lexical = memories.memories_like(agent_id=agent_id, text=item.content, k=DEDUP_CANDIDATES)
    found = (
        LongTermMemory.objects.active()
        .current(timezone.now())
        .filter(
            agent_id=agent_id,
            memory_type=item.memory_type,
            pk__in=[*similarity, *(hit.id for hit in lexical)],
        )
    )
    candidates = [
        Candidate(memory, similarity.get(memory.pk), text_similarity(memory.content, item.content))
        for memory in found
    ]
    return sorted(candidates, key=lambda c: (-c.closeness(), -c.memory.pk))


def _duplicate_of(candidates: list[Candidate], measures: Measures) -> LongTermMemory | None:
    """The memory the item repeats (its vector more similar than the model's duplicate
    level, or its text than DUPLICATE_TEXT_SIMILARITY), if any: the one most above."""
    best = max(candidates, key=lambda c: c.margin(measures), default=None)
    return best.memory if best is not None and best.margin(measures) > 0 else None


def _superseded_by_rule(
    candidates: list[Candidate], item: Extracted, measures: Measures
) -> tuple[LongTermMemory, str] | None:
    """The closest memory, when the item supersedes it by the offline rule
    (memory.supersession), with why; None leaves both (a duplicate merges)."""
    if not candidates:
        return None
    closest = candidates[0]
    judged = supersession.verdict(
        closest.memory.content,
        item.content,
        similarity=closest.similarity,
        same_subject=measures.same_subject,
    )
    return (closest.memory, judged.why) if judged.supersedes else None


def _create(
    run: ConsolidationRun, item: Sourced, vector: Vector | None, fresh: dict[int, Fresh]
) -> LongTermMemory:
    memory = memories.memory_create(
        agent_id=run.agent_id,
        content=item.content,
        memory_type=item.memory_type,
        source_session=run.session_id,
        actor=CONSOLIDATION,
        note={RUN_NOTE: run.pk},
        source_messages=item.message_ids,
    )
    if vector is not None:
        fresh[memory.pk] = (item.memory_type, vector)
    return memory


def _supersede(
    run: ConsolidationRun,
    olds: list[LongTermMemory],
    item: Sourced,
    vector: Vector | None,
    fresh: dict[int, Fresh],
    note: dict[str, Any],
) -> None:
    """A new memory that supersedes the `olds`. A curated memory too: its text stays, in the
    old memory with its history, and a person can undo the supersession."""
    new = _create(run, item, vector, fresh)
    new.refresh_from_db(fields=["created_at", "valid_from"])
    for old in olds:
        if new.said_at < old.said_at:
            continue  # the old one was said later (an import from the past): both stay
        memories.memory_supersede(old, new, actor=CONSOLIDATION, note={RUN_NOTE: run.pk, **note})


def _of_its_attribute(agent_id: str, item: Extracted) -> list[LongTermMemory]:
    """The agent's current memories of the attribute the item gives a value to (memory.
    attributes), of any type and however far their texts, oldest first; none when it gives
    none."""
    attribute = attributes.of_memory(item.content)
    if attribute is None:
        return []
    current = LongTermMemory.objects.active().current(timezone.now())
    return list(current.filter(agent_id=agent_id, attribute=attribute).order_by("pk"))


def _older_values(agent_id: str, item: Sourced) -> list[LongTermMemory]:
    """Those the item gives a new value to: all of them, as "I live in Paris" and "since I'm
    based in Paris…" both give way to "we moved to Berlin"."""
    return [
        memory
        for memory in _of_its_attribute(agent_id, item)
        if supersession.attribute_verdict(memory.content, item.content).supersedes
    ]


CREATED, MERGED, IGNORED = "created", "merged", "ignored"


def _store(
    run: ConsolidationRun,
    item: Sourced,
    vector: Vector | None,
    measures: Measures,
    fresh: dict[int, Fresh],
) -> str:
    """By the offline rules: supersede the closest memory when the item updates it, merge the
    item into the memory it repeats, or create one. Returns what it did."""
    older = _older_values(run.agent_id, item)
    if older:
        why = supersession.attribute_verdict(older[0].content, item.content).why
        _supersede(run, older, item, vector, fresh, {"reason": why, "decided_by": "rules"})
        return CREATED
    candidates = _candidates(run.agent_id, item, vector, fresh)
    superseded = _superseded_by_rule(candidates, item, measures)
    if superseded is not None:
        old, why = superseded
        _supersede(run, [old], item, vector, fresh, {"reason": why, "decided_by": "rules"})
        return CREATED
    duplicate = _duplicate_of(candidates, measures)
    if duplicate is not None:
        _merge(run, duplicate, item)
        return MERGED
    _create(run, item, vector, fresh)
    return CREATED


# --- the chat model's choice: add, update, supersede or ignore -------------------------------

# How many of its closest memories the chat model sees beside an item.
CHAT_CANDIDATES = 5
CHAT_ACTIONS = ("add", "update", "supersede", "ignore")
RULES_DECIDED = "the rules decided what each memory updates"

DECISION_PROMPT = """下面每条新记忆后面列出了与它最相近的已有记忆（#编号）。为每条新记忆选一个动作：
- add：新的信息，新增一条记忆（和已有记忆可以同时成立，例如"喜欢茶"和"也喜欢咖啡"）；
- update：和某条已有记忆说的是同一件事、同一个值（重复或换了说法），合并进去，给出 id；
- supersede：和某条已有记忆是同一件事，但值变了（搬家、换工作、预算变了），新增并取代它，给出 id；
- ignore：不值得记住。
只输出一个 JSON 对象，不要其他文字，格式：
{{"decisions": [{{"item": 0, "action": "add|update|supersede|ignore", "id": 12}}]}}
add 和 ignore 不需要 id。

{items}"""


@dataclass(frozen=True)
class Decision:
    action: str  # one of CHAT_ACTIONS
    memory_id: int | None = None  # the memory an update or a supersession names


def _decision_prompt(items: list[Extracted], candidates: dict[int, list[Candidate]]) -> str:
    lines = []
    for number, near in candidates.items():
        item = items[number]
        lines.append(f"新记忆 {number} [{item.memory_type}]: {item.content}")
        lines += [f"  #{c.memory.pk} [{c.memory.memory_type}]: {c.memory.content}" for c in near]
    return DECISION_PROMPT.format(items="\n".join(lines))


def _decision(entry: Any, candidates: dict[int, list[Candidate]]) -> tuple[int, Decision] | None:
    """One entry of the answer as (item, decision), or None when it names an item not asked
    about, an action not offered, or a memory not among the item's candidates."""
    if not isinstance(entry, dict):
        return None
    number, action, memory_id = entry.get("item"), entry.get("action"), entry.get("id")
    if not isinstance(number, int) or number not in candidates or action not in CHAT_ACTIONS:
        return None
    if action in ("add", "ignore"):
        return number, Decision(action)
    offered = {c.memory.pk for c in candidates[number]}
    if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id not in offered:
        return None
    return number, Decision(action, memory_id)


def _parse_decisions(answer: str, candidates: dict[int, list[Candidate]]) -> dict[int, Decision]:
    """The valid decisions of an answer shaped as DECISION_PROMPT asks, by item (the first
    for an item named twice); ValueError when it is not that JSON at all. An item left
    without a valid decision goes the offline way."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    document = json.loads(answer[start : end + 1])
    entries = document.get("decisions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError('no "decisions" list in the answer')
    decisions: dict[int, Decision] = {}
    for entry in entries:
        valid = _decision(entry, candidates)
        if valid is None:
            logger.info("Consolidation: left out the chat model's decision %.200r", entry)
        elif valid[0] not in decisions:
            decisions[valid[0]] = valid[1]
    return decisions


def llm_decide(
    chat: ChatClient, items: list[Extracted], candidates: dict[int, list[Candidate]]
) -> dict[int, Decision]:
    """The chat model's choice for each item that has memories near it, asked again once
    when the answer is not the JSON asked for; raises LLMError when the model fails and
    InvalidAnswer after a second bad answer."""
    if not candidates:
        return {}
    prompt = _decision_prompt(items, candidates)
    for attempt in (1, 2):
        answer = chat.complete(prompt, json_object=True)
        try:
            return _parse_decisions(answer, candidates)
        except ValueError as exc:
            chat.usage.invalid_answer()
            logger.warning("Decision answer %s was not the JSON asked for: %s", attempt, exc)
    raise InvalidAnswer(INVALID_ANSWER_REASON)


def _offered(agent_id: str, item: Extracted, vector: Vector | None) -> list[Candidate]:
    """What the chat model sees beside an item, CHAT_CANDIDATES in all: the current memories
    of the attribute it gives a value to, newest first, which similarity may not find ("I
    work at Spotify" beside "my first week at Shopify"), then its closest memories."""
    same = [
        Candidate(memory, None, text_similarity(memory.content, item.content))
        for memory in reversed(_of_its_attribute(agent_id, item))
    ]
    shown = {candidate.memory.pk for candidate in same}
    near = [c for c in _candidates(agent_id, item, vector, {}) if c.memory.pk not in shown]
    return [*same, *near][:CHAT_CANDIDATES]


def _chat_decisions(
    run: ConsolidationRun, items: list[Extracted], item_vectors: list[Vector | None]
) -> dict[int, Decision]:
    """With the chat model that extracted the items, its decisions, asked before the write
    transaction (a model may be slow); none when it fails: the rules decide, and the run
    says why."""
    chat = configured_chat()
    if run.extractor != "llm" or chat is None:
        return {}
    candidates = {
        number: offered
        for number, (item, vector) in enumerate(zip(items, item_vectors, strict=True))
        if (offered := _offered(run.agent_id, item, vector))
    }
    try:
        return llm_decide(chat, items, candidates)
    except LLMError as exc:
        logger.warning("Decisions by the chat model failed, the rules decide: %s", exc)
        chat.usage.fell_back()
        run.reason = f"{str(exc)[:400]}: {RULES_DECIDED}"
        return {}


def _apply(
    run: ConsolidationRun,
    item: Sourced,
    vector: Vector | None,
    decision: Decision,
    fresh: dict[int, Fresh],
) -> str | None:
    """What the chat model chose, in the write transaction; None when the memory it named
    has changed state since (an earlier item superseded it): the rules decide then."""
    if decision.action == "ignore":
        return IGNORED
    if decision.action == "add":
        _create(run, item, vector, fresh)
        return CREATED
    memory = (
        LongTermMemory.objects.active()
        .current(timezone.now())
        .filter(pk=decision.memory_id, agent_id=run.agent_id)
        .first()
    )
    if memory is None:
        return None
    if decision.action == "update":
        _merge(run, memory, item)
        return MERGED
    _supersede(run, [memory], item, vector, fresh, {"decided_by": "chat model"})
    return CREATED


# --- consolidation runs: requests, the 30-second window, what each run covers ---------------


@dataclass(frozen=True)
class Covered:
    """A point in a session: its last message and summary a run covers (or covered)."""

    message_id: int
    summary_id: int


def _covered(agent_id: str, session_id: str) -> Covered:
    done = ConsolidationRun.objects.filter(
        agent_id=agent_id, session_id=session_id, status=RunStatus.DONE
    ).aggregate(message=Max("last_message_id"), summary=Max("last_summary_id"))
    return Covered(done["message"] or 0, done["summary"] or 0)


def _window_end(
    agent_id: str, now: datetime, *, behind_waiting: bool
) -> tuple[datetime, str] | None:
    """When the agent may next be consolidated, and why it waits; None for now.

    The 30 seconds keep two extractions of the agent from running at once (both would merge
    into the same memories): they start 30 s after the last run started, or after a run that
    is still going. `behind_waiting` places a new request 30 s after the agent's runs already
    waiting, so that a burst of ended sessions is consolidated one by one, not all retried at
    the same moment.
    """
    runs = ConsolidationRun.objects.filter(agent_id=agent_id)
    ends = []
    last_start = (
        runs.filter(status__in=STARTED, started_at__gt=now - CONSOLIDATION_WINDOW)
        .exclude(extractor="")  # a run that found nothing new extracted nothing
        .aggregate(last=Max("started_at"))["last"]
    )
    if last_start is not None:
        ends.append((last_start + CONSOLIDATION_WINDOW, WINDOW_REASON))
    if runs.filter(
        status=RunStatus.RUNNING,
        started_at__lte=now - CONSOLIDATION_WINDOW,
        started_at__gt=now - STALE_RUN,
    ).exists():
        ends.append((now + CONSOLIDATION_WINDOW, BUSY_REASON))  # a long run: look again later
    if behind_waiting:
        waiting = runs.filter(status__in=WAITING).values_list("run_after", flat=True)
        ends += [
            ((run_after or now) + CONSOLIDATION_WINDOW, WINDOW_REASON) for run_after in waiting
        ]
    end = max(ends, default=None, key=lambda end: end[0])
    return end if end is not None and end[0] > now else None


def _join(run: ConsolidationRun, *, trigger: str, up_to: int | None) -> None:
    """A request for a session that already waits: a session end makes the run take
    everything there is when it starts; a turn request moves its end to the newer reply."""
    if trigger == Trigger.SESSION_END:
        run.trigger, run.last_message_id = trigger, None
    elif run.last_message_id is not None and up_to is not None:
        run.last_message_id = max(run.last_message_id, up_to)
    run.save(update_fields=["trigger", "last_message_id"])


def request_consolidation(
    *, agent_id: str, session_id: str, trigger: str, up_to: int | None = None
) -> ConsolidationRun:
    """Ask for the session's consolidation (up to message `up_to`, else all of it); returns
    the waiting run that will do it.

    A session already waiting joins its run. Otherwise the run is queued, or deferred to the
    end of the agent's 30-second window, never dropped. Its task is queued in the same
    transaction: a request is never stored without the task that runs it.
    """
    now = timezone.now()
    with transaction.atomic():
        waiting = ConsolidationRun.objects.filter(
            agent_id=agent_id, session_id=session_id, status__in=WAITING
        ).first()
        if waiting is not None:
            _join(waiting, trigger=trigger, up_to=up_to)
            return waiting
        run_after, reason = _window_end(agent_id, now, behind_waiting=True) or (None, "")
        run = ConsolidationRun.objects.create(
            agent_id=agent_id,
            session_id=session_id,
            trigger=trigger,
            status=RunStatus.QUEUED if run_after is None else RunStatus.DEFERRED,
            requested_at=now,
            run_after=run_after,
            reason=reason,
            last_message_id=up_to,
        )
        scheduling.schedule_consolidation(run)
    return run


def consolidate_after_turn(reply: MainMessage) -> ConsolidationRun | None:
    """Ask for a run up to this reply when 20 or more assistant turns have passed since the
    session's last run (the summary task asks for the newest reply of each session it took).

    Counted by id up to this reply, never with the session's current count: when the worker
    catches up after a burst, the reply counts the turns before it, and one run covers them.
    """
    runs = ConsolidationRun.objects.filter(agent_id=reply.agent_id, session_id=reply.session_id)
    if runs.filter(status__in=WAITING, last_message_id__isnull=True).exists():
        return None  # a waiting end-of-session run takes every turn
    # Failed runs count too: their messages wait for the next run, not for the next reply.
    since = runs.aggregate(last=Max("last_message_id"))["last"] or 0
    turns = MainMessage.objects.filter(
        agent_id=reply.agent_id,
        session_id=reply.session_id,
        role=Role.ASSISTANT,
        id__gt=since,
        id__lte=reply.pk,
    ).count()
    if turns < TURNS_PER_CONSOLIDATION:
        return None
    return request_consolidation(
        agent_id=reply.agent_id, session_id=reply.session_id, trigger=Trigger.TURNS, up_to=reply.pk
    )


def _fail_stale_runs(agent_id: str, now: datetime) -> None:
    ConsolidationRun.objects.filter(
        agent_id=agent_id, status=RunStatus.RUNNING, started_at__lte=now - STALE_RUN
    ).update(status=RunStatus.FAILED, finished_at=now, reason=STALE_REASON)


def recover_run(run_id: int, *, requeued: bool) -> None:
    """The run of a consolidation task whose worker died (memory.tasks.recover_abandoned_tasks,
    in its transaction): done once, never left `running`.

    A run the dead worker had started (its writes are one transaction, so none of them
    stayed) waits again as the same run, for the task queued again with it; when the
    session already has a waiting run, that one covers these messages instead. When the
    task is not queued again (its workers died too often), the run fails and the session's
    next run covers its messages. A run that had finished is left as it is.
    """
    run = ConsolidationRun.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.status not in (RunStatus.RUNNING, *WAITING):
        return
    if not requeued:
        _finish(run, RunStatus.FAILED, GIVEN_UP_REASON)
        return
    if run.status != RunStatus.RUNNING:
        return  # its task died before starting it: the task queued again starts it
    waiting = ConsolidationRun.objects.filter(
        agent_id=run.agent_id, session_id=run.session_id, status__in=WAITING
    ).first()
    if waiting is not None:
        _join(waiting, trigger=run.trigger, up_to=run.last_message_id)
        _finish(run, RunStatus.FAILED, JOINED_REASON)
        return
    run.status, run.reason = RunStatus.QUEUED, REQUEUED_REASON
    run.started_at, run.extractor, run.last_summary_id = None, "", None  # set when it starts
    if run.trigger == Trigger.SESSION_END:
        run.last_message_id = None  # as a waiting end of session: all there is when it starts
    run.save()


def _newest_id(model: type[MainMessage] | type[ShortTermMemory], run: ConsolidationRun) -> int:
    rows = model.objects.filter(agent_id=run.agent_id, session_id=run.session_id)
    return rows.aggregate(newest=Max("id"))["newest"] or 0


def _has_new(run: ConsolidationRun, covered: Covered, end: Covered) -> bool:
    scope = {"agent_id": run.agent_id, "session_id": run.session_id}
    messages = MainMessage.objects.filter(
        **scope, id__gt=covered.message_id, id__lte=end.message_id
    )
    summaries = ShortTermMemory.objects.filter(
        **scope, id__gt=covered.summary_id, id__lte=end.summary_id
    )
    return messages.exists() or summaries.exists()


def _start(run: ConsolidationRun, now: datetime, end: Covered, status: str, reason: str) -> None:
    run.status, run.reason, run.started_at = status, reason, now
    run.last_message_id, run.last_summary_id = end.message_id, end.summary_id
    if status == RunStatus.RUNNING:
        run.extractor = "llm" if configured_chat() is not None else "rules"
    else:
        run.finished_at = now
    run.save()


def _claim(run_id: int, now: datetime) -> tuple[ConsolidationRun, Covered] | None:
    """Start a waiting run; returns it with where the session's last done run ended, or None
    when it does not run now.

    One write transaction (IMMEDIATE on SQLite), so two workers cannot both find the agent's
    window free. Inside the window the run is deferred again, with a new task.
    """
    with transaction.atomic():
        run = ConsolidationRun.objects.filter(pk=run_id, status__in=WAITING).first()
        if run is None:
            return None  # it ran already
        _fail_stale_runs(run.agent_id, now)
        covered = _covered(run.agent_id, run.session_id)
        # An end-of-session run takes everything there is now; a turn run, up to its reply.
        end = Covered(
            max(run.last_message_id or _newest_id(MainMessage, run), covered.message_id),
            max(_newest_id(ShortTermMemory, run), covered.summary_id),
        )
        if not _has_new(run, covered, end):
            _start(run, now, end, RunStatus.DONE, NOTHING_NEW_REASON)
            return None
        window = _window_end(run.agent_id, now, behind_waiting=False)
        if window is not None:
            run.status, (run.run_after, run.reason) = RunStatus.DEFERRED, window
            run.save(update_fields=["status", "run_after", "reason"])
            scheduling.schedule_consolidation(run)
            return None
        _start(run, now, end, RunStatus.RUNNING, "")
    return run, covered


def _turns(run: ConsolidationRun, reply_ids: set[int]) -> dict[int, tuple[int, ...]]:
    """The turn each of these replies ended, as its summary read it (memory.summaries): the
    user's messages since the assistant's reply before, and the reply itself."""
    if not reply_ids:
        return {}
    session = MainMessage.objects.filter(
        agent_id=run.agent_id, session_id=run.session_id, role__in=(Role.USER, Role.ASSISTANT)
    )
    before = session.filter(role=Role.ASSISTANT, id__lt=min(reply_ids))
    start = before.aggregate(start=Max("id"))["start"] or 0
    messages = session.filter(id__gt=start, id__lte=max(reply_ids)).order_by("id")
    turns: dict[int, tuple[int, ...]] = {}
    turn: list[int] = []
    for message_id, role in messages.values_list("id", "role"):
        turn.append(message_id)
        if role == Role.ASSISTANT:
            if message_id in reply_ids:
                turns[message_id] = tuple(turn)
            turn = []
    return turns


def _with_turns(
    run: ConsolidationRun,
    answered: list[Answered],
    replies: list[int | None],
    run_messages: list[int],
) -> list[Sourced]:
    """The chat model's memories with the messages of the turns they came from: of the
    summaries each names, else of all the run's summaries; the run's messages when no turn
    is known (summaries written before they named their reply)."""
    turns = _turns(run, {reply for reply in replies if reply is not None}) if answered else {}
    every = tuple(sorted({pk for turn in turns.values() for pk in turn})) or tuple(run_messages)
    found = []
    for item in answered:
        named = {pk for n in item.summaries for pk in turns.get(replies[n - 1] or 0, ())}
        found.append(Sourced(item.memory_type, item.content, tuple(sorted(named)) or every))
    return found


def _extract(run: ConsolidationRun, covered: Covered) -> list[Sourced]:
    """What the session said since the last done run, with the messages each memory came
    from: by the chat model from the summaries, or by the rules from the messages, also when
    the chat model fails (the run's extractor and reason then say so)."""
    scope = {"agent_id": run.agent_id, "session_id": run.session_id}
    # The extractor decides whose words count: the user's, and an assistant's only when the
    # message names a person speaking (both sides of a conversation between people).
    said = list(
        MainMessage.objects.filter(
            **scope,
            role__in=(Role.USER, Role.ASSISTANT),
            id__gt=covered.message_id,
            id__lte=run.last_message_id,
        ).order_by("timestamp", "id")
    )
    chat = configured_chat()
    if run.extractor == "llm" and chat is not None:
        summaries = list(
            ShortTermMemory.objects.filter(
                **scope, id__gt=covered.summary_id, id__lte=run.last_summary_id
            )
            .order_by("created_at", "id")
            .values_list("content", "reply_id")
        )
        try:
            answered = llm_extract(chat, [text for text, _ in summaries]) if summaries else []
        except LLMError as exc:
            logger.warning("Extraction by the chat model failed, the rules extract: %s", exc)
            chat.usage.fell_back()
            # The client's messages name the chat model ("chat model unreachable: ...").
            run.extractor, run.reason = "rules", f"{str(exc)[:400]}: {FELL_BACK}"
        else:
            replies = [reply for _, reply in summaries]
            return _with_turns(run, answered, replies, [message.pk for message in said])
    return [
        Sourced(item.memory_type, item.content, tuple(message.pk for message in messages))
        for item, messages in extract_with_sources(said)
    ]


def _finish(run: ConsolidationRun, status: str, reason: str = "") -> ConsolidationRun:
    run.status, run.reason, run.finished_at = status, reason, timezone.now()
    run.save(update_fields=["status", "reason", "finished_at", "extractor", "created", "merged"])
    return run


def run_consolidation(run_id: int) -> ConsolidationRun | None:
    """The worker's side of a request: consolidate what the session said since its last done
    run, or defer the run again while the agent's window lasts. Returns the run if it ran.

    When the chat model fails, the rules extract and the run says why; a run that fails
    otherwise is recorded as such (`failed`, with why), its messages left for the session's
    next run.
    """
    claimed = _claim(run_id, timezone.now())
    if claimed is None:
        return None
    run, covered = claimed
    try:
        extracted = _extract(run, covered)
        item_vectors, measures = _embed_items(extracted)
        decisions = _chat_decisions(run, extracted, item_vectors)
        fresh: dict[int, Fresh] = {}
        # Short: index lookups and small writes, nothing slow.
        with transaction.atomic():
            for number, (item, vector) in enumerate(zip(extracted, item_vectors, strict=True)):
                chosen = decisions.get(number)
                done = None if chosen is None else _apply(run, item, vector, chosen, fresh)
                done = done or _store(run, item, vector, measures, fresh)
                run.created += done == CREATED
                run.merged += done == MERGED
            _finish(run, RunStatus.DONE, run.reason)
    except Exception as exc:
        run.created = run.merged = 0  # the write transaction was rolled back
        _finish(run, RunStatus.FAILED, f"{type(exc).__name__}: {exc}"[:500])
        raise
    cleanup(run.agent_id)
    return run
