"""Every list of the API pages the same way (`limit`, `offset` -> `{"items", "count"}`), and
the count is the true number of rows, memory search included."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.memories import memory_create, memory_update
from memory.models import LongTermMemory, ShortTermMemory

pytestmark = pytest.mark.django_db


def test_a_sessions_summaries_page_with_a_count(api):
    api.post("/sessions/s1/messages", {"role": "user", "content": "hi"})
    summaries = [
        ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content=f"turn {n}")
        for n in range(12)
    ]
    newest_first = [s.pk for s in reversed(summaries)]

    first = api.get("/sessions/s1/summaries", limit=5).json()
    last = api.get("/sessions/s1/summaries", limit=5, offset=10).json()

    assert first["count"] == last["count"] == 12
    assert [s["id"] for s in first["items"]] == newest_first[:5]
    assert [s["id"] for s in last["items"]] == newest_first[10:]
    assert api.get("/sessions/s1/summaries", limit=501).status_code == 422
    assert api.get("/sessions/nope/summaries").status_code == 404


def test_a_memorys_history_pages_with_a_count(api):
    memory = memory_create(agent_id="agent-a", content="v0", memory_type="fact", actor="api")
    for n in range(1, 8):
        memory_update(memory, actor="api", content=f"v{n}")

    page = api.get(f"/memories/{memory.pk}/history", limit=3, offset=1).json()

    assert page["count"] == 8
    assert [h["new_content"] for h in page["items"]] == ["v6", "v5", "v4"]
    assert api.get(f"/memories/{memory.pk}/history", offset=-1).status_code == 422
    assert api.get("/memories/999999/history").status_code == 404


def test_memory_search_counts_every_match_past_a_thousand(api):
    matching = [
        LongTermMemory(
            agent_id="agent-a", content=f"The user likes tea number {n}.", memory_type="fact"
        )
        for n in range(1005)
    ]
    others = [
        LongTermMemory(agent_id="agent-a", content="The user likes coffee.", memory_type="fact"),
        LongTermMemory(agent_id="agent-b", content="Agent b likes tea.", memory_type="fact"),
    ]
    LongTermMemory.objects.bulk_create(matching + others)

    page = api.get("/memories", q="tea", limit=500, offset=1000).json()

    assert page["count"] == 1005
    assert len(page["items"]) == 5
    assert all("tea" in m["content"] for m in page["items"])


def test_memory_search_counts_only_what_the_filters_keep(api):
    memory_create(agent_id="agent-a", content="tea with milk", memory_type="preference", actor="a")
    memory_create(agent_id="agent-a", content="tea at noon", memory_type="fact", actor="a")
    expired = memory_create(agent_id="agent-a", content="tea, once", memory_type="fact", actor="a")
    LongTermMemory.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(days=1)
    )
    archived = memory_create(
        agent_id="agent-a", content="tea, archived", memory_type="fact", actor="a"
    )
    LongTermMemory.objects.filter(pk=archived.pk).update(archived_at=timezone.now())

    def count(**query: object) -> int:
        return api.get("/memories", q="tea", **query).json()["count"]

    assert count() == 2
    assert count(type="fact") == 1
    assert count(include_expired=True) == 3
    assert count(limit=1) == 2


def test_memory_search_ranks_the_best_match_first_across_pages(api):
    memory_create(agent_id="agent-a", content="green tea", memory_type="fact", actor="a")
    best = memory_create(
        agent_id="agent-a", content="green tea, green tea, green tea", memory_type="fact", actor="a"
    )
    memory_create(agent_id="agent-a", content="tea", memory_type="fact", actor="a")

    first = api.get("/memories", q="green tea", limit=1).json()
    rest = api.get("/memories", q="green tea", limit=5, offset=1).json()

    assert [m["id"] for m in first["items"]] == [best.pk]
    assert first["count"] == rest["count"] == 3
    assert best.pk not in [m["id"] for m in rest["items"]]
    assert len(rest["items"]) == 2
