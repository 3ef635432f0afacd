"""API keys: per-agent bearer keys, stored hashed, created by command or admin, revocable."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from memory.auth import UNAUTHORIZED_DETAIL
from memory.models import ApiKey, MainMessage

pytestmark = pytest.mark.django_db

PROTECTED = [
    ("post", "/sessions/s1/messages"),
    ("get", "/sessions"),
    ("get", "/sessions/s1/messages"),
    ("delete", "/sessions/s1"),
    ("get", "/sessions/s1/summaries"),
    ("get", "/memories"),
    ("post", "/memories"),
    ("get", "/memories/1"),
    ("patch", "/memories/1"),
    ("delete", "/memories/1"),
    ("post", "/memories/1/expire"),
    ("post", "/messages/1/subagent"),
    ("post", "/messages/1/subagent/result"),
    ("get", "/messages/1/subagent"),
    ("get", "/messages/1"),
    ("get", "/search?q=x"),
    ("post", "/sessions/s1/context"),
    ("post", "/sessions/s1/end"),
    ("get", "/memories/1/history"),
]


def create_key(agent: str) -> str:
    out = io.StringIO()
    call_command("create_api_key", "--agent", agent, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip().splitlines()[-1]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
@pytest.mark.parametrize("header", [None, "Bearer orca_not-a-key", "Basic dXNlcjpwYXNz", "Bearer "])
def test_every_endpoint_but_health_needs_a_valid_key(client, method, path, header):
    headers = {"Authorization": header} if header else {}
    response = getattr(client, method)(f"/api/v1{path}", headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": UNAUTHORIZED_DETAIL, "errors": []}
    assert "create_api_key" in response.json()["detail"]  # how to get a key


def test_the_command_prints_the_key_alone_on_its_last_line_and_stores_only_a_hash(client):
    key = create_key("agent-a")

    assert key.startswith("orca_") and len(key) > 40
    row = ApiKey.objects.get()
    assert row.agent_id == "agent-a"
    assert key not in (row.key_hash, row.prefix, row.name)
    assert key.startswith(row.prefix)
    response = client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_a_key_writes_as_its_agent(client):
    key = create_key("助手-1")
    response = client.post(
        "/api/v1/sessions/s1/messages",
        data={"role": "user", "content": "你好"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 201
    assert MainMessage.objects.get().agent_id == "助手-1"


def test_a_revoked_key_stops_working_at_once(client):
    key = create_key("agent-a")
    headers = {"Authorization": f"Bearer {key}"}
    assert client.get("/api/v1/sessions", headers=headers).status_code == 200
    prefix = ApiKey.objects.get().prefix
    call_command("revoke_api_key", prefix, stdout=io.StringIO())

    response = client.get("/api/v1/sessions", headers=headers)
    assert response.status_code == 401
    assert ApiKey.objects.get().revoked_at is not None


def test_a_key_revoked_by_another_process_stops_working_within_a_second(client, monkeypatch):
    from django.utils import timezone

    from memory import auth

    key = create_key("agent-a")
    headers = {"Authorization": f"Bearer {key}"}
    assert client.get("/api/v1/sessions", headers=headers).status_code == 200
    # Another process revokes it (the other gunicorn worker, a command): this one trusts
    # the key it checked for KEY_TRUST_SECONDS, then asks the database again.
    ApiKey.objects.update(revoked_at=timezone.now())
    assert client.get("/api/v1/sessions", headers=headers).status_code == 200
    now = auth.time.monotonic()
    monkeypatch.setattr(auth.time, "monotonic", lambda: now + auth.KEY_TRUST_SECONDS)
    assert client.get("/api/v1/sessions", headers=headers).status_code == 401


def test_the_command_refuses_a_bad_agent_name():
    with pytest.raises(CommandError, match="agent_id must not contain"):
        call_command("create_api_key", "--agent", "a/b", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no active key"):
        call_command("revoke_api_key", "orca_nothing", stdout=io.StringIO())
    assert not ApiKey.objects.exists()


def test_the_admin_creates_a_key_shows_it_once_and_revokes(admin_client):
    response = admin_client.post(
        "/admin/memory/apikey/add/", {"agent_id": "agent-z", "name": "laptop"}, follow=True
    )
    row = ApiKey.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    key = next(word for m in shown for word in m.split() if word.startswith("orca_"))
    assert (row.agent_id, row.name) == ("agent-z", "laptop")
    assert key.startswith(row.prefix) and key != row.key_hash

    admin_client.post("/admin/memory/apikey/", {"action": "revoke", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.revoked_at is not None


def test_the_admin_refuses_a_bad_agent_name(admin_client):
    response = admin_client.post("/admin/memory/apikey/add/", {"agent_id": "bad/name"})
    assert response.status_code == 200
    assert "must not contain" in response.content.decode()
    assert not ApiKey.objects.exists()
