"""GET /api/v1/health: open to all, and honest about the database, vectors and backlog."""

from __future__ import annotations

import json
from unittest.mock import ANY

import pytest
import sqlite_vec
from django.conf import settings
from django.db import connection

from memory import embeddings
from memory.models import MainMessage
from memory.tokens import estimate_tokens
from tests.helpers import last_line, manage

pytestmark = pytest.mark.django_db


def stored(content: str, **fields) -> MainMessage:
    """A message with its token count, as message_add and the admin store it."""
    return MainMessage.objects.create(
        session_id="s", content=content, token_count=estimate_tokens(content), **fields
    )


def test_it_reports_a_healthy_service_without_auth(client, sql):
    stored("long enough to embed", role="user")
    stored("short", role="user")
    stored("tools are never embedded", role="tool")
    stored("already has its vector", role="assistant", has_embedding=True)

    response = client.get("/api/v1/health")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    if connection.vendor == "sqlite":
        assert body["database"] == {
            "ok": True,
            "engine": "sqlite",
            "sqlite_version": sql("SELECT sqlite_version()")[0][0],
            "postgres_version": None,
            "journal_mode": "wal",
            # No agent of this store reaches the derived text index's size: FTS5 answers.
            "text_index": {
                "indexes": 0,
                "rows": 0,
                "bytes": 0,
                "limit_bytes": settings.ORCA.text_index_mb * 1024 * 1024,
            },
            "error": None,
        }
        assert body["vector_search"] == {
            "enabled": True,
            "reason": None,
            "sqlite_vec_version": f"v{sqlite_vec.__version__}",
            "pgvector_version": None,
            "knn": {"path": "memory_index", "reason": ANY},
            # Inside the test's transaction KNN reads vec0: nothing is held in memory.
            "memory_index": {
                "matrices": 0,
                "graphs": 0,
                "vectors": 0,
                "bytes": 0,
                "limit_bytes": settings.ORCA.vector_cache_mb * 1024 * 1024,
                "mapped_bytes": 0,
            },
        }
    else:
        assert body["database"] == {
            "ok": True,
            "engine": "postgresql",
            "sqlite_version": None,
            "postgres_version": sql("SHOW server_version")[0][0],
            "journal_mode": None,
            "text_index": None,
            "error": None,
        }
        assert body["vector_search"] == {
            "enabled": True,
            "reason": None,
            "sqlite_vec_version": None,
            "pgvector_version": sql("SELECT extversion FROM pg_extension WHERE extname = 'vector'")[
                0
            ][0],
            "knn": {"path": "pgvector", "reason": ANY},
            "memory_index": None,
        }
    assert body["embedding"] == {
        "provider": "none",
        "model": None,
        "dimension": None,
        "languages": None,
        "ready": False,
        "reason": "no embedding provider is configured",
        "pending": None,  # nothing will write them
        "last_success_at": None,
        "last_error": None,
        "last_error_at": None,
        "failing": False,
    }


def test_it_is_in_the_openapi_schema(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert "/api/v1/health" in schema["paths"]


@pytest.mark.slow
def test_it_answers_503_when_the_database_cannot_be_opened(tmp_path):
    unopenable = tmp_path / "a-directory.db"
    unopenable.mkdir()
    script = (
        "import json; from django.test import Client; "
        "r = Client(SERVER_NAME='localhost').get('/api/v1/health'); "
        "print(json.dumps({'code': r.status_code, 'body': r.json()}))"
    )
    result = manage(tmp_path, "shell", "-c", script, ORCA_DB_PATH=str(unopenable))
    report = json.loads(last_line(result))
    assert report["code"] == 503
    assert report["body"]["status"] == "error"
    assert report["body"]["database"]["ok"] is False
    assert "unable to open database file" in report["body"]["database"]["error"]


def test_the_api_docs_load_without_a_cdn(client):
    page = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower()


def test_it_names_the_bundled_models_languages_and_counts_what_it_will_embed(client, monkeypatch):
    model = embeddings.LocalEmbedder(embeddings.local_model(None))
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: model)
    stored("long enough to embed", role="user")

    body = client.get("/api/v1/health").json()["embedding"]

    assert (body["provider"], body["model"]) == ("local", embeddings.DEFAULT_LOCAL_MODEL)
    assert "Chinese" in body["languages"] and "English" in body["languages"]
    assert body["pending"] == 1
