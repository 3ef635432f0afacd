"""Archived memories have no vector, so they never take a long-term KNN's places; bringing one
back queues a new vector. Every path that archives or unarchives keeps that."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from memory import cleanup, index, vectors
from memory.memories import memory_create, memory_unarchive
from memory.models import LongTermMemory, LongTermMemoryHistory

pytestmark = pytest.mark.django_db


def stored(fake_embedder, agent_id: str = "a1") -> set[int]:
    """Ids of the agent's memories that have a vector, found by a KNN over all of them."""
    probe = fake_embedder.embed(["probe"])[0]
    hits = index.knn(index.MEMORY_VECTORS, agent_id=agent_id, embedding=probe, k=4096)
    return {hit.id for hit in hits}


def remember(content: str, *, used: int = 0, agent_id: str = "a1") -> LongTermMemory:
    memory = memory_create(agent_id=agent_id, content=content, memory_type="fact", actor="api")
    LongTermMemory.objects.filter(pk=memory.pk).update(access_count=used)
    return memory


@pytest.fixture
def embedded(fake_embedder):
    """Four memories of a1, all embedded; `rare` is the least used."""
    memories = {
        "rare": remember("The user once visited Oslo.", used=0),
        "tea": remember("The user drinks green tea.", used=5),
        "job": remember("The user is a nurse.", used=5),
        "pet": remember("The user has a cat named Miso.", used=5),
    }
    vectors.embed_pending()
    assert stored(fake_embedder) == {m.pk for m in memories.values()}
    return memories


def test_archiving_by_the_cleanup_drops_the_vector(fake_embedder, embedded):
    assert cleanup.cleanup("a1", cap=3) == 1

    rare = LongTermMemory.objects.get(pk=embedded["rare"].pk)
    assert rare.archived_at is not None and rare.has_embedding is False
    assert stored(fake_embedder) == {embedded[k].pk for k in ("tea", "job", "pet")}
    change = LongTermMemoryHistory.objects.filter(memory_id=rare.pk).latest("id")
    assert (change.action, change.actor, change.changes["cap"]) == ("archive", "cleanup", 3)


def test_the_worker_does_not_embed_archived_memories_again(fake_embedder, embedded):
    cleanup.cleanup("a1", cap=3)
    LongTermMemory.objects.filter(pk=embedded["rare"].pk).update(content="edited while archived")

    assert vectors.pending_count() == 0
    assert vectors.embed_pending() == 0
    assert embedded["rare"].pk not in stored(fake_embedder)


def test_a_memory_archived_while_its_vector_is_computed_gets_none(fake_embedder):
    vectors.prepare_index(fake_embedder.signature)
    memory = remember("The user plays chess.")
    source = next(s for s in vectors.SOURCES if s.model is LongTermMemory)
    batch = list(source.pending())
    LongTermMemory.objects.filter(pk=memory.pk).update(archived_at=timezone.now())

    assert vectors._write(source, batch, fake_embedder.embed(["The user plays chess."])) == 0
    assert stored(fake_embedder) == set()


def test_long_term_knn_candidates_are_all_active_however_many_are_archived(fake_embedder, embedded):
    for n in range(20):
        remember(f"The user visited museum number {n}.")
    vectors.embed_pending()

    cleanup.cleanup("a1", cap=3)

    active = set(LongTermMemory.objects.active().values_list("pk", flat=True))
    assert len(active) == 3
    assert stored(fake_embedder) == active


def test_the_cleanup_drops_the_vectors_of_memories_archived_before_this_rule(
    fake_embedder, embedded
):
    # Archived by an older version, which kept the vector.
    LongTermMemory.objects.filter(pk=embedded["rare"].pk).update(archived_at=timezone.now())
    assert embedded["rare"].pk in stored(fake_embedder)

    assert cleanup.cleanup("a1", cap=10) == 0

    assert embedded["rare"].pk not in stored(fake_embedder)
    assert LongTermMemory.objects.get(pk=embedded["rare"].pk).has_embedding is False


def test_unarchiving_queues_a_new_vector(fake_embedder, embedded):
    cleanup.cleanup("a1", cap=3)
    rare = LongTermMemory.objects.get(pk=embedded["rare"].pk)

    memory_unarchive(rare, actor="admin:ann")

    rare.refresh_from_db()
    assert (rare.archived_at, rare.has_embedding) == (None, False)
    assert vectors.pending_count() == 1
    vectors.embed_pending()
    assert rare.pk in stored(fake_embedder)
    change = LongTermMemoryHistory.objects.filter(memory_id=rare.pk).latest("id")
    assert (change.action, change.actor, change.changes) == (
        "update",
        "admin:ann",
        {"archived_at": None},
    )


def test_the_admin_brings_archived_memories_back(admin_client, fake_embedder, embedded):
    cleanup.cleanup("a1", cap=3)
    pk = embedded["rare"].pk
    data = {"action": "unarchive", "_selected_action": [pk, embedded["tea"].pk]}

    response = admin_client.post(
        reverse("admin:memory_longtermmemory_changelist"), data, follow=True
    )

    assert response.status_code == 200
    assert "Brought back 1 memory(ies)" in response.content.decode()
    assert LongTermMemory.objects.get(pk=pk).archived_at is None
    assert vectors.pending_count() == 1
    assert LongTermMemoryHistory.objects.filter(memory_id=pk).latest("id").actor == "admin:admin"


def test_the_dashboard_brings_an_archived_memory_back(admin_client, fake_embedder, embedded):
    cleanup.cleanup("a1", cap=3)
    pk = embedded["rare"].pk
    card = admin_client.get(reverse("memory", args=[pk])).content.decode()
    assert reverse("memory_unarchive", args=[pk]) in card
    assert (
        "Unarchive"
        not in admin_client.get(reverse("memory", args=[embedded["tea"].pk])).content.decode()
    )

    response = admin_client.post(
        reverse("memory_unarchive", args=[pk]), headers={"HX-Request": "true"}
    )

    assert response.status_code == 200
    assert "Unarchive" not in response.content.decode()
    assert LongTermMemory.objects.get(pk=pk).archived_at is None
    assert LongTermMemoryHistory.objects.filter(memory_id=pk).latest("id").actor == "ui:admin"
