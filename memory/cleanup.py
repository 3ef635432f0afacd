"""Cleanup: an agent's long-term memories beyond `long_term_cap` are archived (kept), those a
newer memory superseded first, then the least used and least confident. Run after each
consolidation (memory.consolidation).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory import memories
from memory.models import CLEANUP, LongTermMemory
from memory.vectors import drop_vectors


def cleanup(agent_id: str, *, cap: int | None = None) -> int:
    """Archive the superseded, then the least used, least confident memories beyond the cap;
    returns how many.

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
    # Superseded memories first (the oldest supersession first): they are out of recall.
    order = (F("valid_until").asc(nulls_last=True), "access_count", "confidence", "created_at")
    victims = list(active.order_by(*order, "id")[:excess])
    with transaction.atomic():
        for memory in victims:
            memories.memory_archive(memory, actor=CLEANUP, now=now, changes={"cap": cap})
    return len(victims)
