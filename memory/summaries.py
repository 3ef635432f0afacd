"""Turn summaries, run by background tasks: short-term memory.

After each assistant reply, a one-sentence summary of the turn goes to short-term memory; each
session keeps its newest 10. With a chat model (`[llm]`, memory.llm) the model writes it;
without one, or when it fails, an offline summarizer does (the first sentence each side said),
so the layer fills on the default setup. Each summary records which path made it
(`summarizer`). Consolidation (memory.consolidation) reads them.
"""

from __future__ import annotations

import logging

from django.db import transaction

from memory import scheduling
from memory.extraction import sentences as _sentences
from memory.llm import LLMError, configured_chat
from memory.models import MainMessage, Role, ShortTermMemory, Summarizer
from memory.vectors import delete_with_vectors

logger = logging.getLogger(__name__)

SUMMARIES_KEPT = 10
SUMMARY_CHARS = 100

SUMMARY_PROMPT = "请用一句话总结本轮对话的关键信息，不超过 50 字：\n\n{turn}"


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


def summarize_turns(replies: list[MainMessage]) -> list[ShortTermMemory]:
    """Store the summaries of the turns these replies end, in one transaction; drop each
    session's summaries beyond the newest 10. The chat model, when there is one, is asked
    before the transaction: a write never waits for the network."""
    if not replies:
        return []
    summaries = [_summary_of(reply) for reply in replies]
    with transaction.atomic():
        stored = ShortTermMemory.objects.bulk_create(summaries)
        for agent_id, session_id in {(reply.agent_id, reply.session_id) for reply in replies}:
            _keep_newest_summaries(agent_id, session_id)
        scheduling.with_the_write(scheduling.schedule_embedding)
    return stored


def _summary_of(reply: MainMessage) -> ShortTermMemory:
    turn = _turn_of(reply)
    chat = configured_chat()
    text = None
    if chat is not None:
        lines = "\n".join(f"{m.role}: {m.content[:2000]}" for m in turn)
        try:
            text = chat.complete(SUMMARY_PROMPT.format(turn=lines), max_tokens=120)
        except LLMError as exc:
            logger.warning("Summary by the chat model failed, using the offline one: %s", exc)
            chat.usage.fell_back()
    return ShortTermMemory(
        agent_id=reply.agent_id,
        session_id=reply.session_id,
        content=(text or offline_summary(turn))[:1000],
        source_count=len(turn),
        reply_id=reply.pk,
        summarizer=Summarizer.LLM if text else Summarizer.OFFLINE,
    )


def _keep_newest_summaries(agent_id: str, session_id: str) -> None:
    summaries = ShortTermMemory.objects.of_session(agent_id, session_id)
    old = list(summaries.values_list("id", flat=True)[SUMMARIES_KEPT:])
    if old:
        delete_with_vectors(ShortTermMemory.objects.filter(pk__in=old))
