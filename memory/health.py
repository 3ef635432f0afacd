"""The service's health: what `GET /api/v1/health` reports and the dashboard will show."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import DatabaseError, connection

from memory import index
from memory.models import MainMessage

# Embedding providers arrive with the retrieval work; until then nothing embeds.
EMBEDDING_PROVIDER = "none"


@dataclass(frozen=True)
class Health:
    status: str  # "ok", "degraded" (running without vectors) or "error" (no database)
    database: dict[str, object]
    vector_search: dict[str, object]
    embedding: dict[str, object]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def service_health() -> Health:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT sqlite_version()")
            (sqlite_version,) = cursor.fetchone()
            cursor.execute("PRAGMA journal_mode")
            (journal_mode,) = cursor.fetchone()
        vectors = index.vector_status()
        pending = MainMessage.objects.awaiting_embedding().count()
    except DatabaseError as exc:
        return Health(
            status="error",
            database={"ok": False, "error": str(exc)},
            vector_search={"enabled": False, "reason": "the database is unavailable"},
            embedding={"provider": EMBEDDING_PROVIDER, "pending": None},
        )
    return Health(
        status="ok" if vectors.enabled else "degraded",
        database={"ok": True, "sqlite_version": sqlite_version, "journal_mode": journal_mode},
        vector_search={
            "enabled": vectors.enabled,
            "reason": vectors.reason,
            "sqlite_vec_version": vectors.version,
            "dimension": settings.ORCA.embedding_dim,
        },
        embedding={"provider": EMBEDDING_PROVIDER, "pending": pending},
    )
