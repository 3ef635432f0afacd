"""memories_like: the agent's memories most like a text, by its vector or by its words; the
one query context, consolidation's dedup and the memories' text search all use."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory import index, vectors
from memory.memories import memories_like, memory_archive, memory_create
from memory.models import LongTermMemory

pytestmark = pytest.mark.django_db


def remember(content: str, *, memory_type: str = "fact", agent_id: str = "a1") -> LongTermMemory:
    return memory_create(agent_id=agent_id, content=content, memory_type=memory_type, actor="api")


@pytest.fixture
def drinks():
    """Three facts of a1 sharing two, one and no words with "green tea"; a preference and
    another agent's fact saying it outright."""
    return {
        "green": remember("The user drinks green tea every morning."),
        "coffee": remember("The user drinks coffee, never tea."),
        "nurse": remember("The user is a nurse."),
        "wants": remember("The user wants green tea.", memory_type="preference"),
        "other": remember("Green tea.", agent_id="a2"),
    }


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # FakeEmbedder's vectors are unit


def test_it_finds_by_vector_the_nearest_memories_scored_by_cosine_similarity(fake_embedder, drinks):
    vectors.embed_pending()
    probe = fake_embedder.embed(["green tea"])[0]

    hits = memories_like(agent_id="a1", vector=probe, k=3, memory_type="fact")

    assert [hit.id for hit in hits] == [drinks[n].pk for n in ("green", "coffee", "nurse")]
    for hit, name in zip(hits, ("green", "coffee", "nurse"), strict=True):
        expected = _cosine(probe, fake_embedder.embed([drinks[name].content])[0])
        assert hit.score == pytest.approx(expected, abs=1e-5)
    # What context and consolidation read from the vector index before it had one owner.
    assert hits == index.knn(
        index.MEMORY_VECTORS,
        agent_id="a1",
        embedding=probe,
        k=3,
        filters=[("memory_type", "=", "fact")],
    )


def test_it_searches_every_type_by_vector_without_a_type_and_never_an_archived_memory(
    fake_embedder, drinks
):
    vectors.embed_pending()
    memory_archive(drinks["green"], actor="cleanup", now=timezone.now())
    probe = fake_embedder.embed(["green tea"])[0]

    hits = memories_like(agent_id="a1", vector=probe, k=2)

    assert [hit.id for hit in hits] == [drinks["wants"].pk, drinks["coffee"].pk]


def test_it_finds_by_text_the_best_matches_first_archived_ones_included(drinks):
    memory_archive(drinks["coffee"], actor="cleanup", now=timezone.now())

    hits = memories_like(agent_id="a1", text="green tea", k=10)

    # BM25: the shortest text saying both words first; no other agent's, none without a word.
    assert [hit.id for hit in hits] == [
        drinks["wants"].pk,
        drinks["green"].pk,
        drinks["coffee"].pk,
    ]
    assert hits[0].score > hits[1].score > hits[2].score > 0
    assert hits == index.lexical_search(index.MEMORY_TEXT, agent_id="a1", query="green tea", k=10)
    assert [hit.id for hit in memories_like(agent_id="a1", text="green tea", k=1)] == [
        drinks["wants"].pk
    ]


def test_it_finds_nothing_by_a_text_without_a_term(drinks):
    assert memories_like(agent_id="a1", text="👍", k=10) == []


@pytest.mark.parametrize(
    "like",
    [
        {},
        {"text": "green tea", "vector": [1.0] + [0.0] * 63},
        {"text": "green tea", "memory_type": "fact"},  # the lexical index has no type column
    ],
)
def test_it_refuses_a_query_it_cannot_answer_as_asked(like):
    with pytest.raises(ValueError):
        memories_like(agent_id="a1", k=10, **like)
