"""Long-term memories and session summaries through HTTP."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as timezone_of

import pytest
from django.utils import timezone

from memory.memories import memory_create, memory_update
from memory.models import LongTermMemory, LongTermMemoryHistory, ShortTermMemory
from memory.validation import InvalidInput

pytestmark = pytest.mark.django_db


def create(api, content: str, memory_type: str = "fact", **fields) -> dict:
    response = api.post("/memories", {"content": content, "memory_type": memory_type, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_creates_and_reads_a_memory(api):
    body = create(api, "用户偏好深色模式", "preference", confidence=0.9, source_session="s1")

    row = LongTermMemory.objects.get()
    assert body["id"] == row.pk
    assert (row.agent_id, row.memory_type, row.confidence, row.source_session) == (
        "agent-a",
        "preference",
        0.9,
        "s1",
    )
    assert body["expired"] is False and body["access_count"] == 0
    assert api.get(f"/memories/{row.pk}").json() == body


@pytest.mark.parametrize(
    "payload",
    [
        {"content": "x", "memory_type": "rumour"},
        {"content": "x", "memory_type": "fact", "confidence": 1.5},
        {"content": "", "memory_type": "fact"},
        {"content": "x"},
        {"content": "x", "memory_type": "fact", "source_session": "a/b"},
    ],
)
def test_it_refuses_invalid_memories(api, payload):
    assert api.post("/memories", payload).status_code == 422
    assert not LongTermMemory.objects.exists()


def test_it_lists_by_type_text_and_expiry(api):
    tea = create(api, "用户偏好喝茶", "preference")
    create(api, "The project uses Django", "project")
    old = create(api, "用户以前偏好咖啡", "preference")
    api.post(f"/memories/{old['id']}/expire")

    def ids(**query) -> list[int]:
        body = api.get("/memories", **query).json()
        return [m["id"] for m in body["items"]]

    assert len(ids()) == 2
    assert ids(type="preference") == [tea["id"]]
    assert ids(q="偏好") == [tea["id"]]
    assert sorted(ids(q="偏好", include_expired="true")) == sorted([tea["id"], old["id"]])
    assert ids(q="django") != [] and ids(q="nothing-like-this") == []


def test_it_patches_only_the_fields_given(api):
    memory = create(api, "likes tea", "preference", confidence=0.4)

    body = api.patch(
        f"/memories/{memory['id']}", {"content": "likes green tea", "confidence": 0.7}
    ).json()

    assert (body["content"], body["confidence"], body["memory_type"]) == (
        "likes green tea",
        0.7,
        "preference",
    )
    row = LongTermMemory.objects.get()
    assert (row.content, row.confidence) == ("likes green tea", 0.7)
    assert api.patch(f"/memories/{memory['id']}", {"content": None}).status_code == 422
    assert api.patch(f"/memories/{memory['id']}", {"confidence": -1}).status_code == 422
    assert LongTermMemory.objects.get().content == "likes green tea"


def test_expiring_keeps_the_memory_and_a_null_expiry_restores_it(api):
    memory = create(api, "on holiday in May", "fact")

    expired = api.post(f"/memories/{memory['id']}/expire").json()
    assert expired["expired"] is True
    assert LongTermMemory.objects.get().expires_at <= timezone.now()

    restored = api.patch(f"/memories/{memory['id']}", {"expires_at": None}).json()
    assert restored["expired"] is False and restored["expires_at"] is None


def test_expiring_keeps_an_earlier_expiry(api):
    past = timezone.now() - timedelta(days=3)
    memory = create(api, "old news", "fact", expires_at=past.isoformat())
    api.post(f"/memories/{memory['id']}/expire")
    assert LongTermMemory.objects.get().expires_at == past


def test_it_deletes_a_memory(api):
    memory = create(api, "temporary", "fact")
    assert api.delete(f"/memories/{memory['id']}").status_code == 204
    assert not LongTermMemory.objects.exists()
    assert api.get(f"/memories/{memory['id']}").status_code == 404


def test_it_lists_a_sessions_summaries_newest_first(api):
    api.post("/sessions/s1/messages", {"role": "user", "content": "hi"})
    first = ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content="first")
    second = ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content="second")
    ShortTermMemory.objects.create(agent_id="agent-a", session_id="s2", content="elsewhere")

    body = api.get("/sessions/s1/summaries").json()

    assert [s["id"] for s in body["items"]] == [second.pk, first.pk]
    assert body["count"] == 2
    assert api.get("/sessions/none/summaries").status_code == 404


@pytest.mark.parametrize(
    "expires_at",
    [
        datetime(2030, 1, 1),  # naive: which zone?
        datetime(
            9999, 12, 31, 23, 30, tzinfo=timezone_of(timedelta(hours=-1))
        ),  # year 10000 in UTC
        datetime(1, 1, 1, 0, 30, tzinfo=timezone_of(timedelta(hours=1))),  # year 0 in UTC
    ],
    ids=["naive", "after 9999 in UTC", "before year 1 in UTC"],
)
def test_the_memory_functions_refuse_an_expiry_that_cannot_be_stored_before_writing(expires_at):
    # What the admin, the dashboard and consolidation call: the check comes before any write.
    with pytest.raises(InvalidInput, match="expires_at"):
        memory_create(
            agent_id="a1", content="x", memory_type="fact", actor="t", expires_at=expires_at
        )
    memory = memory_create(agent_id="a1", content="y", memory_type="fact", actor="t")
    with pytest.raises(InvalidInput, match="expires_at"):
        memory_update(memory, actor="t", expires_at=expires_at)

    assert list(LongTermMemory.objects.values_list("content", "expires_at")) == [("y", None)]
    assert LongTermMemoryHistory.objects.count() == 1  # the second one's creation
