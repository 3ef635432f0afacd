"""Long-term memories: the curation flows the API, the admin, the UI and consolidation share.

Every change is kept in `long_term_memory_history` with who made it and the text before and
after, so nothing a curator or a consolidation does is lost from view.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, Q, QuerySet, When
from django.utils import timezone

from memory import index, tasks
from memory.models import LongTermMemory, LongTermMemoryHistory, MemoryAction, MemoryType
from memory.validation import InvalidInput, check_content, check_datetime, check_identifier
from memory.vectors import delete_with_vectors

# A text query ranks at most this many matches; enough for a person paging through results.
MAX_QUERY_MATCHES = 1000
EDITABLE_FIELDS = frozenset(
    {"content", "memory_type", "confidence", "expires_at", "source_session"}
)


def _check(fields: dict[str, Any], allowed: frozenset[str] = EDITABLE_FIELDS) -> None:
    if unknown := set(fields) - allowed:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}")
    for name in ("content", "memory_type", "confidence"):
        if name in fields and fields[name] is None:
            raise InvalidInput(f"{name} must not be null")
    if "content" in fields:
        check_content("content", fields["content"])
    if "memory_type" in fields and fields["memory_type"] not in MemoryType.values:
        raise InvalidInput(f"memory_type must be one of {', '.join(MemoryType.values)}")
    if "confidence" in fields and not 0 <= fields["confidence"] <= 1:
        raise InvalidInput("confidence must be between 0 and 1")
    if fields.get("source_session") is not None:
        check_identifier("source_session", fields["source_session"])
    if fields.get("expires_at") is not None:
        # Before anything is written: a naive or overflowing time would fail after the save.
        check_datetime("expires_at", fields["expires_at"])


def _history(
    memory: LongTermMemory,
    action: str,
    actor: str,
    *,
    old_content: str | None = None,
    changes: dict[str, Any] | None = None,
) -> None:
    LongTermMemoryHistory.objects.create(
        memory_id=memory.pk,
        agent_id=memory.agent_id,
        action=action,
        actor=actor,
        old_content=old_content,
        new_content=None if action == MemoryAction.DELETE else memory.content,
        changes=changes,
    )


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def memory_create(
    *, agent_id: str, content: str, memory_type: str, actor: str, **fields: Any
) -> LongTermMemory:
    fields = {"content": content, "memory_type": memory_type, **fields}
    _check(fields)
    with transaction.atomic():
        memory = LongTermMemory.objects.create(agent_id=agent_id, **fields)
        _history(memory, MemoryAction.CREATE, actor)
        transaction.on_commit(tasks.schedule_embedding, robust=True)
    return memory


def memory_update(
    memory: LongTermMemory, *, actor: str, action: str = MemoryAction.UPDATE, **fields: Any
) -> LongTermMemory:
    """Change the given fields; a new text waits for its new vector.

    Consolidation also raises `source_count` when a new extraction confirms the memory.
    """
    _check(fields, EDITABLE_FIELDS | {"source_count"})
    changed = {k: v for k, v in fields.items() if getattr(memory, k) != v}
    if not changed:
        return memory
    old_content = memory.content
    with transaction.atomic():
        for name, value in changed.items():
            setattr(memory, name, value)
        memory.updated_at = timezone.now()
        update = [*changed, "updated_at"]
        if "content" in changed or "memory_type" in changed:
            memory.has_embedding = False
            update.append("has_embedding")
            transaction.on_commit(tasks.schedule_embedding, robust=True)
        memory.save(update_fields=update)
        _history(
            memory,
            action,
            actor,
            old_content=old_content if "content" in changed else None,
            changes={k: _jsonable(v) for k, v in changed.items() if k != "content"} or None,
        )
    return memory


def memory_expire(
    memory: LongTermMemory, *, actor: str, now: datetime | None = None
) -> LongTermMemory:
    """Expire now (kept and down-weighted, never deleted); an earlier expiry stays."""
    now = now or timezone.now()
    if memory.expires_at is None or memory.expires_at > now:
        memory_update(memory, actor=actor, action=MemoryAction.EXPIRE, expires_at=now)
    return memory


def memory_delete(memory: LongTermMemory, *, actor: str) -> None:
    with transaction.atomic():
        _history(memory, MemoryAction.DELETE, actor, old_content=memory.content)
        delete_with_vectors(LongTermMemory.objects.filter(pk=memory.pk))


def memories_of(
    agent_id: str,
    *,
    memory_type: str | None = None,
    query: str | None = None,
    include_expired: bool = False,
    now: datetime | None = None,
) -> QuerySet[LongTermMemory]:
    """The agent's active memories: best text match first with a query, else newest first."""
    memories = LongTermMemory.objects.filter(agent_id=agent_id).active()
    if memory_type is not None:
        memories = memories.filter(memory_type=memory_type)
    if not include_expired:
        now = now or timezone.now()
        memories = memories.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    if not query:
        return memories.order_by("-created_at", "-id")
    hits = index.lexical_search(
        index.MEMORY_TEXT, agent_id=agent_id, query=query, k=MAX_QUERY_MATCHES
    )
    rank = Case(*(When(pk=hit.id, then=position) for position, hit in enumerate(hits)))
    return memories.filter(pk__in=[hit.id for hit in hits]).order_by(rank, "-id")
