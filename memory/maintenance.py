"""Memory maintenance, run by background tasks: turn summaries, consolidation, cleanup.

- After each assistant reply, a one-sentence summary of the turn goes to short-term memory;
  each session keeps its newest 10.
- At session end or every 20 turns, the session is consolidated into typed long-term
  memories; one close to an existing memory of the agent (> 0.8 similar) updates it instead
  of duplicating it. An agent is consolidated at most once every 30 seconds.
- Beyond `long_term_cap`, the least used, least confident memories are archived (kept).

With a SiliconFlow key the chat model writes summaries and extracts memories; without one an
offline summarizer and a rule-based extractor do, so every layer fills on the default setup.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory import memories, tasks
from memory.extraction import MEMORY_CHARS, Extracted, offline_extract
from memory.extraction import sentences as _sentences
from memory.llm import LLMError, configured_chat
from memory.models import (
    ConsolidationRun,
    LongTermMemory,
    MainMessage,
    MemoryAction,
    MemoryType,
    Role,
    ShortTermMemory,
)
from memory.vectors import delete_with_vectors, drop_vectors

logger = logging.getLogger(__name__)

SUMMARIES_KEPT = 10
TURNS_PER_CONSOLIDATION = 20
CONSOLIDATION_WINDOW = timedelta(seconds=30)
DUPLICATE_SIMILARITY = 0.8
MERGE_CONFIDENCE_STEP = 0.1
SUMMARY_CHARS = 100

SUMMARY_PROMPT = "请用一句话总结本轮对话的关键信息，不超过 50 字：\n\n{turn}"
EXTRACTION_PROMPT = """从下面的对话摘要中提取值得长期记住的信息（用户偏好、事实、决策、项目背景）。
只输出一个 JSON 数组，不要其他文字，格式：
[{{"type": "preference|fact|decision|project", "content": "一句话"}}]
没有值得记住的信息时输出 []。

摘要：
{summaries}"""

# --- turn summaries ------------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    sentences = _sentences(text)
    return (sentences[0] if sentences else text.strip())[:SUMMARY_CHARS]


def offline_summary(turn: list[MainMessage]) -> str:
    """The first sentence of what each side said: "user: ... / assistant: ..."."""
    return " / ".join(f"{m.role}: {_first_sentence(m.content)}" for m in turn)


def _turn_of(reply: MainMessage) -> list[MainMessage]:
    """The reply and the user messages since the previous assistant reply."""
    earlier = MainMessage.objects.filter(
        agent_id=reply.agent_id, session_id=reply.session_id, id__lt=reply.pk
    ).order_by("-id")
    turn = [reply]
    for message in earlier[:50]:
        if message.role == Role.ASSISTANT:
            break
        if message.role == Role.USER:
            turn.insert(0, message)
    return turn


def summarize_turn(reply: MainMessage) -> ShortTermMemory:
    """Store the turn's summary; drop the session's summaries beyond the newest 10."""
    turn = _turn_of(reply)
    chat = configured_chat()
    text = None
    if chat is not None:
        lines = "\n".join(f"{m.role}: {m.content[:2000]}" for m in turn)
        try:
            text = chat.complete(SUMMARY_PROMPT.format(turn=lines), max_tokens=120)
        except LLMError as exc:
            logger.warning("Summary by the chat model failed, using the offline one: %s", exc)
    with transaction.atomic():
        summary = ShortTermMemory.objects.create(
            agent_id=reply.agent_id,
            session_id=reply.session_id,
            content=(text or offline_summary(turn))[:1000],
            source_count=len(turn),
            reply_id=reply.pk,
        )
        _keep_newest_summaries(reply.agent_id, reply.session_id)
        transaction.on_commit(tasks.schedule_embedding, robust=True)
    return summary


def _keep_newest_summaries(agent_id: str, session_id: str) -> None:
    summaries = ShortTermMemory.objects.filter(agent_id=agent_id, session_id=session_id)
    old = list(
        summaries.order_by("-created_at", "-id").values_list("id", flat=True)[SUMMARIES_KEPT:]
    )
    if old:
        delete_with_vectors(ShortTermMemory.objects.filter(pk__in=old))


def turns_in_session(agent_id: str, session_id: str) -> int:
    return MainMessage.objects.filter(
        agent_id=agent_id, session_id=session_id, role=Role.ASSISTANT
    ).count()


# --- consolidation -------------------------------------------------------------------------


def _normalised(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def text_similarity(a: str, b: str) -> float:
    """Dice coefficient of character bigrams: language-neutral, 1.0 for the same text."""
    a, b = _normalised(a), _normalised(b)
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    grams_a = [a[i : i + 2] for i in range(len(a) - 1)]
    grams_b = [b[i : i + 2] for i in range(len(b) - 1)]
    pool = list(grams_b)
    shared = 0
    for gram in grams_a:
        if gram in pool:
            pool.remove(gram)
            shared += 1
    return 2 * shared / (len(grams_a) + len(grams_b))


def _parse_extraction(answer: str) -> list[Extracted]:
    start, end = answer.find("["), answer.rfind("]")
    if start < 0 or end < start:
        raise ValueError("no JSON array in the answer")
    items = json.loads(answer[start : end + 1])
    extracted = []
    for item in items:
        kind, content = item.get("type"), item.get("content")
        if kind in MemoryType.values and isinstance(content, str) and content.strip():
            extracted.append(Extracted(kind, content.strip()[:MEMORY_CHARS]))
    return extracted


def llm_extract(summaries: list[str]) -> list[Extracted] | None:
    """The chat model's extraction; asked twice when its JSON is malformed, else None."""
    chat = configured_chat()
    prompt = EXTRACTION_PROMPT.format(summaries="\n".join(f"- {s}" for s in summaries))
    for attempt in (1, 2):
        try:
            return _parse_extraction(chat.complete(prompt))
        except (ValueError, AttributeError, LLMError) as exc:
            logger.warning("Extraction attempt %s failed: %s", attempt, exc)
    return None


def _store(agent_id: str, session_id: str, item: Extracted) -> bool:
    """Merge into a > 0.8 similar memory of the agent (True), or create one (False)."""
    candidates = LongTermMemory.objects.filter(agent_id=agent_id).active()
    best, similarity = None, 0.0
    for memory in candidates.filter(memory_type=item.memory_type).only("id", "content"):
        score = text_similarity(memory.content, item.content)
        if score > similarity:
            best, similarity = memory, score
    if best is not None and similarity > DUPLICATE_SIMILARITY:
        memory = LongTermMemory.objects.get(pk=best.pk)
        memories.memory_update(
            memory,
            actor="consolidation",
            action=MemoryAction.MERGE,
            content=item.content,
            confidence=min(1.0, memory.confidence + MERGE_CONFIDENCE_STEP),
            source_count=memory.source_count + 1,
        )
        return True
    memories.memory_create(
        agent_id=agent_id,
        content=item.content,
        memory_type=item.memory_type,
        source_session=session_id,
        actor="consolidation",
    )
    return False


def consolidate_session(*, agent_id: str, session_id: str, trigger: str) -> ConsolidationRun:
    """Extract the session's long-term memories, unless the agent was consolidated < 30 s ago."""
    now = timezone.now()
    recent = ConsolidationRun.objects.filter(
        agent_id=agent_id, started_at__gt=now - CONSOLIDATION_WINDOW, skipped_reason=""
    )
    run = ConsolidationRun(agent_id=agent_id, session_id=session_id, trigger=trigger)
    if recent.exists():
        run.skipped_reason = "the agent was consolidated less than 30 seconds ago"
        run.save()
        return run
    summaries = list(
        ShortTermMemory.objects.filter(agent_id=agent_id, session_id=session_id)
        .order_by("created_at", "id")
        .values_list("content", flat=True)
    )
    if configured_chat() is not None:
        run.extractor = "llm"
        extracted = llm_extract(summaries) if summaries else []
        if extracted is None:
            run.skipped_reason = "the chat model's answer was not valid JSON, twice"
            run.save()
            return run
    else:
        run.extractor = "rules"
        user_messages = MainMessage.objects.filter(
            agent_id=agent_id, session_id=session_id, role=Role.USER
        ).order_by("timestamp", "id")
        extracted = offline_extract(list(user_messages))
    with transaction.atomic():
        for item in extracted:
            if _store(agent_id, session_id, item):
                run.merged += 1
            else:
                run.created += 1
        run.save()
    cleanup(agent_id)
    return run


# --- cleanup -------------------------------------------------------------------------------


def cleanup(agent_id: str, *, cap: int | None = None) -> int:
    """Archive the least used, least confident memories beyond the cap; returns how many.

    Archiving drops their vectors (memories.memory_archive). Memories archived before it did
    lose theirs here too.
    """
    cap = settings.ORCA.long_term_cap if cap is None else cap
    archived_with_vectors = LongTermMemory.objects.filter(
        agent_id=agent_id, archived_at__isnull=False, has_embedding=True
    )
    if archived_with_vectors.exists():
        drop_vectors(archived_with_vectors)
    active = LongTermMemory.objects.filter(agent_id=agent_id).active()
    excess = active.count() - cap
    if excess <= 0:
        return 0
    now = timezone.now()
    victims = list(active.order_by("access_count", "confidence", "created_at", "id")[:excess])
    with transaction.atomic():
        for memory in victims:
            memories.memory_archive(memory, actor="cleanup", now=now, changes={"cap": cap})
    return len(victims)
