"""Two agents, every endpoint: another agent's data is a 404 and stays as it was."""

from __future__ import annotations

import pytest

from memory.models import LongTermMemory, MainMessage, ShortTermMemory
from subagents.models import SubagentMessage

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_data(api_for):
    alice = api_for("alice")
    message = alice.post(
        "/sessions/secret/messages", {"role": "assistant", "content": "alice's plan"}
    ).json()
    alice.post(
        f"/messages/{message['id']}/subagent",
        {"agent_name": "coder", "role": "assistant", "content": "alice's reasoning"},
    )
    memory = alice.post(
        "/memories", {"content": "alice likes tea", "memory_type": "preference"}
    ).json()
    ShortTermMemory.objects.create(agent_id="alice", session_id="secret", content="alice summary")
    return {"message": message["id"], "memory": memory["id"]}


def snapshot() -> list:
    return [
        list(MainMessage.objects.order_by("id").values()),
        list(SubagentMessage.objects.order_by("id").values()),
        list(ShortTermMemory.objects.order_by("id").values()),
        list(LongTermMemory.objects.order_by("id").values()),
    ]


def test_another_agent_sees_nothing_and_changes_nothing(api_for, alice_data):
    bob = api_for("bob")
    before = snapshot()
    msg, mem = alice_data["message"], alice_data["memory"]

    not_found = [
        bob.get("/sessions/secret/messages"),
        bob.get("/sessions/secret/summaries"),
        bob.delete("/sessions/secret"),
        bob.get(f"/memories/{mem}"),
        bob.patch(f"/memories/{mem}", {"content": "bob was here"}),
        bob.delete(f"/memories/{mem}"),
        bob.post(f"/memories/{mem}/expire"),
        bob.get(f"/messages/{msg}"),
        bob.get(f"/messages/{msg}/subagent"),
        bob.post(
            f"/messages/{msg}/subagent", {"agent_name": "x", "role": "assistant", "content": "x"}
        ),
        bob.post(f"/messages/{msg}/subagent/result", {"agent_name": "x", "content": "x"}),
        bob.post("/sessions/secret/end"),
        bob.get(f"/memories/{mem}/history"),
    ]
    assert [r.status_code for r in not_found] == [404] * len(not_found)
    assert all(r.json() == {"detail": "Not Found", "errors": []} for r in not_found)
    assert bob.get("/sessions").json() == {"items": [], "count": 0}
    assert bob.get("/memories").json() == {"items": [], "count": 0}
    assert bob.get("/memories", q="tea", include_expired="true").json()["count"] == 0
    assert bob.get("/search", q="alice plan reasoning").json()["hits"] == []
    context = bob.post("/sessions/secret/context", {"query": "alice tea plan"}).json()
    assert context["messages"] == []
    assert "alice" not in str({**context, "explanation": {**context["explanation"], "query": ""}})
    assert snapshot() == before

    # Bob writing to a session of the same name creates his own, leaving Alice's alone.
    assert (
        bob.post("/sessions/secret/messages", {"role": "user", "content": "bob's"}).status_code
        == 201
    )
    assert bob.get("/sessions/secret/messages").json()["count"] == 1
    assert MainMessage.objects.filter(agent_id="alice").count() == 1
