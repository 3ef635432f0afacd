"""Long-term memories: the curation flows the API, the admin and the UI share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, Q, QuerySet, When
from django.utils import timezone

from memory import index
from memory.models import LongTermMemory, MemoryType
from memory.validation import InvalidInput, check_content, check_identifier

# A text query ranks at most this many matches; enough for a person paging through results.
MAX_QUERY_MATCHES = 1000
EDITABLE_FIELDS = frozenset(
    {"content", "memory_type", "confidence", "expires_at", "source_session"}
)


def _check(fields: dict[str, Any]) -> None:
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


def memory_create(
    *, agent_id: str, content: str, memory_type: str, **fields: Any
) -> LongTermMemory:
    fields = {"content": content, "memory_type": memory_type, **fields}
    if unknown := set(fields) - EDITABLE_FIELDS:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}")
    _check(fields)
    return LongTermMemory.objects.create(agent_id=agent_id, **fields)


def memory_update(memory: LongTermMemory, **fields: Any) -> LongTermMemory:
    if unknown := set(fields) - EDITABLE_FIELDS:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}")
    _check(fields)
    for name, value in fields.items():
        setattr(memory, name, value)
    memory.save(update_fields=list(fields))
    return memory


def memory_expire(memory: LongTermMemory, *, now: datetime | None = None) -> LongTermMemory:
    """Expire now (kept and down-weighted, never deleted); an earlier expiry stays."""
    now = now or timezone.now()
    if memory.expires_at is None or memory.expires_at > now:
        memory_update(memory, expires_at=now)
    return memory


def memory_delete(memory: LongTermMemory) -> None:
    with transaction.atomic():
        if index.vector_status().enabled:
            index.vector_delete(index.MEMORY_VECTORS, [memory.pk])
        memory.delete()


def memories_of(
    agent_id: str,
    *,
    memory_type: str | None = None,
    query: str | None = None,
    include_expired: bool = False,
    now: datetime | None = None,
) -> QuerySet[LongTermMemory]:
    """The agent's memories: best text match first when there is a query, else newest first."""
    memories = LongTermMemory.objects.filter(agent_id=agent_id)
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
