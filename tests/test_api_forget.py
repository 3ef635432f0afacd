"""The forget endpoints (memory/api_forget.py): each scope answers its receipt; a query is
previewed, then confirmed by the preview's token; another agent's data is never reached."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.models import ForgetReceipt, LongTermMemory, MainMessage
from tests.test_fault_injection import FailingSql

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(api, api_for):
    api.post("/sessions/s1/messages", {"role": "user", "content": "My locker code is 4417"})
    api.post("/sessions/s2/messages", {"role": "user", "content": "I like sailing"})
    api.post("/memories", {"content": "Locker code 4417", "memory_type": "fact"})
    other = api_for("agent-b")
    other.post("/sessions/s1/messages", {"role": "user", "content": "locker code 4417 too"})
    return other


def test_it_previews_then_confirms_a_query(api, stored):
    preview = api.post("/forget", {"query": "locker 4417"})

    assert preview.status_code == 200, preview.content
    body = preview.json()
    assert body["confirm"] is False and body["terms"] == ["locker", "4417"]
    assert body["counts"]["messages"] == 1 and body["counts"]["memories"] == 1
    assert {item["snippet"] for item in body["items"]} == {
        "My locker code is 4417",
        "Locker code 4417",
    }
    assert MainMessage.objects.filter(agent_id="agent-a").count() == 2

    done = api.post("/forget", {"confirm": True, "token": body["token"]})

    assert done.status_code == 200, done.content
    receipt = done.json()["receipt"]
    assert done.json()["repeated"] is False
    assert receipt["counts"] == body["counts"] and receipt["ids"] == body["ids"]
    assert receipt["scope"] == "query" and receipt["actor"] == "api"
    assert list(
        MainMessage.objects.filter(agent_id="agent-a").values_list("content", flat=True)
    ) == ["I like sailing"]
    assert not LongTermMemory.objects.filter(agent_id="agent-a").exists()
    assert MainMessage.objects.filter(agent_id="agent-b").count() == 1

    again = api.post("/forget", {"confirm": True, "token": body["token"]})
    assert again.json()["repeated"] is True and again.json()["receipt"]["id"] == receipt["id"]
    assert api.get("/forget/receipts").json()["count"] == 1
    assert stored.get("/forget/receipts").json()["count"] == 0


def test_a_confirm_with_another_agents_token_is_refused_422(api, stored):
    token = stored.post("/forget", {"query": "locker"}).json()["token"]

    response = api.post("/forget", {"confirm": True, "token": token})

    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"loc": ["body", "token"], "msg": "token is the preview of another agent's forget"}
    ]
    assert MainMessage.objects.count() == 3


@pytest.mark.parametrize(
    "body, msg",
    [
        ({"confirm": False}, "a preview (confirm false) needs the query"),
        ({"confirm": True, "query": "x"}, "a confirm needs the preview's token"),
    ],
)
def test_a_request_missing_its_step_is_refused(api, body, msg):
    response = api.post("/forget", body)
    assert response.status_code == 422
    assert msg in response.json()["detail"]


def test_it_forgets_the_keys_own_agent_only(api, stored):
    assert api.delete("/agents/agent-b").status_code == 404

    response = api.delete("/agents/agent-a")

    assert response.status_code == 200
    assert response.json()["counts"]["messages"] == 2
    assert not MainMessage.objects.filter(agent_id="agent-a").exists()
    assert MainMessage.objects.filter(agent_id="agent-b").exists()
    assert api.delete("/agents/agent-a").status_code == 404
    assert api.get("/sessions").status_code == 200  # the key still works


@pytest.mark.parametrize(
    "statement", [r'^DELETE FROM "long_term_memory_history"', r"^INSERT INTO \"forget_receipts\""]
)
def test_a_database_failing_mid_forget_leaves_everything_as_it_was(api, stored, statement):
    fault = FailingSql(statement, "database is locked")
    with connection.execute_wrapper(fault):
        response = api.delete("/agents/agent-a")

    assert response.status_code == 503
    assert fault.failed == 1
    assert MainMessage.objects.filter(agent_id="agent-a").count() == 2
    assert LongTermMemory.objects.filter(agent_id="agent-a").count() == 1
    assert not ForgetReceipt.objects.exists()
