"""The memory app's JSON endpoints, mounted at /api/v1/ by orca_memory.api."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Schema, Status

from memory.health import service_health

router = Router(tags=["health"])


class DatabaseHealthOut(Schema):
    ok: bool
    sqlite_version: str | None = None
    journal_mode: str | None = None
    error: str | None = None


class VectorHealthOut(Schema):
    enabled: bool
    reason: str | None = None
    sqlite_vec_version: str | None = None
    dimension: int | None = None


class EmbeddingHealthOut(Schema):
    provider: str
    pending: int | None


class HealthOut(Schema):
    status: str
    database: DatabaseHealthOut
    vector_search: VectorHealthOut
    embedding: EmbeddingHealthOut


@router.get("/health", response={200: HealthOut, 503: HealthOut}, auth=None)
def health(request: HttpRequest) -> Status[dict[str, object]]:
    """Database, vector search and embedding backlog. Needs no API key."""
    report = service_health()
    return Status(503 if report.status == "error" else 200, report.as_dict())
