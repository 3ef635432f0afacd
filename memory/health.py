"""The service's health: what `GET /api/v1/health` reports and the dashboard will show."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import DatabaseError

from memory import embeddings, index, vectors


@dataclass(frozen=True)
class Health:
    # "ok"; "degraded" (running, but vectors unusable or the provider failing); "error" (no
    # database). Lexical-only by configuration (provider "none") is not a degradation.
    status: str
    database: dict[str, object]
    vector_search: dict[str, object]
    embedding: dict[str, object]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _embedding_report() -> dict[str, object]:
    embedder = embeddings.configured_embedder()
    status = vectors.vector_search_status(embedder)
    state = vectors.index_state()
    return {
        "provider": embedder.signature.provider if embedder else "none",
        "model": embedder.signature.model if embedder else None,
        "dimension": embedder.signature.dimension if embedder else None,
        "ready": status.enabled,
        "reason": status.reason,
        "pending": vectors.pending_count(),
        "last_success_at": state.last_success_at if state else None,
        "last_error": (state.last_error or None) if state else None,
        "last_error_at": state.last_error_at if state else None,
        "failing": bool(state and state.consecutive_failures),
    }


def service_health() -> Health:
    try:
        database = index.database_report()
        support = index.vector_index_status()
        embedding = _embedding_report()
    except DatabaseError as exc:
        fallback = (
            "messages are kept in the JSONL backup for migrate_jsonl"
            if settings.ORCA.jsonl_backup
            else "messages are refused"
        )
        return Health(
            status="error",
            database={"ok": False, "error": f"{exc}; {fallback}"},
            vector_search={"enabled": False, "reason": "the database is unavailable"},
            embedding={"provider": embeddings.provider_name(), "pending": None},
        )
    degraded = (
        not support.enabled
        or embedding["failing"]
        or (embedding["provider"] != "none" and not embedding["ready"])
    )
    return Health(
        status="degraded" if degraded else "ok",
        database={"ok": True, **database},
        vector_search={
            "enabled": support.enabled,
            "reason": support.reason,
            f"{'sqlite_vec' if database['engine'] == 'sqlite' else 'pgvector'}_version": (
                support.version
            ),
            **index.memory_index_report(),
        },
        embedding=embedding,
    )
