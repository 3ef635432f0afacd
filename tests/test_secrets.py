"""Keys never leak: not into pages, logs, health or error bodies."""

from __future__ import annotations

import dataclasses
import logging

import httpx
import pytest

from memory import embeddings, vectors
from memory.embeddings import EmbeddingError, HttpEmbedder
from memory.messages import message_add

pytestmark = pytest.mark.django_db

PROVIDER_KEY = "sk-provider-secret-4242"


def test_no_key_shows_in_pages_logs_health_or_errors(
    settings, admin_client, client, api_for, caplog, monkeypatch
):
    caplog.set_level(logging.DEBUG)
    settings.ORCA = dataclasses.replace(
        settings.ORCA, llm_api_key=PROVIDER_KEY, embedding_api_key=PROVIDER_KEY
    )
    refusing = HttpEmbedder(
        provider="siliconflow",
        base_url="https://api.example.test/v1",
        api_key=PROVIDER_KEY,
        model="m",
        dimension=8,
        attempts=1,
        backoff_seconds=0,
        transport=httpx.MockTransport(
            lambda request: httpx.Response(401, text=f"bad key {request.headers['Authorization']}")
        ),
    )
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: refusing)
    api = api_for("a1")
    agent_key = api.headers["Authorization"].removeprefix("Bearer ")
    api.post("/sessions/s1/messages", {"role": "user", "content": "a message long enough"})
    message_add(agent_id="a1", session_id="s1", role="assistant", content="another long reply")
    with pytest.raises(EmbeddingError):
        vectors.embed_pending()

    seen = [
        api.get("/health").content.decode(),
        client.get("/api/v1/sessions", headers={"Authorization": "Bearer wrong"}).content.decode(),
        api.get("/sessions").content.decode(),
        admin_client.get("/").content.decode(),
        admin_client.get("/sessions/").content.decode(),
        admin_client.get("/admin/memory/apikey/").content.decode(),
        caplog.text,
    ]
    for text in seen:
        assert PROVIDER_KEY not in text
        assert agent_key not in text
    assert "refused the API key" in seen[0]  # the error is reported, without the key
