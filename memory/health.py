"""The service's health: what `GET /api/v1/health` reports and the dashboard's home page shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError

from memory import embeddings, heartbeat, index, llm, scheduling, vectors


@dataclass(frozen=True)
class Health:
    # "ok"; "degraded" (running, but vectors unusable or the provider failing); "error" (no
    # database). Lexical-only by configuration (provider "none") is not a degradation.
    status: str
    database: dict[str, object]
    vector_search: dict[str, object]
    embedding: dict[str, object]
    worker: dict[str, object]
    llm: dict[str, object]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _embedding_report() -> dict[str, object]:
    embedder = embeddings.configured_embedder()
    status = vectors.vector_search_status(embedder)
    state = vectors.index_state()
    bundled = embeddings.bundled(embedder.signature) if embedder else None
    return {
        "provider": embedder.signature.provider if embedder else "none",
        "model": embedder.signature.model if embedder else None,
        "dimension": embedder.signature.dimension if embedder else None,
        "languages": bundled.languages if bundled else None,
        "ready": status.enabled,
        "reason": status.reason,
        # Without a provider nothing will write them: no backlog to report.
        "pending": vectors.pending_count() if embedder else None,
        "last_success_at": state.last_success_at if state else None,
        "last_error": (state.last_error or None) if state else None,
        "last_error_at": state.last_error_at if state else None,
        "failing": bool(state and state.consecutive_failures),
    }


def _worker_report() -> dict[str, object]:
    """The task workers seen by their heartbeats (memory.heartbeat): `ok` when one runs and
    polls. Without a task queue in the database (tasks run as they are queued), none is
    needed."""
    if not scheduling.tasks_in_database():
        return {"needed": False, "ok": True, "running": 0, "reason": None}
    now = datetime.now(tz=UTC)
    beats = heartbeat.beats()
    alive = [beat for beat in beats if beat.is_alive(now)]
    newest = alive[0] if alive else (beats[0] if beats else None)
    if not alive:
        reason = (
            f"no task worker seen since {newest.at.isoformat(timespec='seconds')}"
            if newest
            else "no task worker has run with this data folder"
        ) + ": nothing is embedded, summarized or consolidated (run manage.py db_worker)"
    elif all(beat.state != "polling" for beat in alive):
        reason = f"the task worker is backing off after a database error: {newest.last_error}"
    else:
        reason = None
    return {
        "needed": True,
        "ok": reason is None,
        "running": len(alive),
        "reason": reason,
        "last_seen_at": newest.at if newest else None,
        "last_error": newest.last_error if newest else None,
        "last_error_at": newest.last_error_at if newest else None,
    }


def _llm_report() -> dict[str, object]:
    """The chat model (its host, never its key) and how its calls went.

    Counts are per process since it started: this web process's own (it calls the model when
    tasks run as they are queued, and in commands), and the running task workers' summed
    from their heartbeats (memory.heartbeat), since they make the summaries and extractions.
    """
    config = settings.ORCA
    configured = config.llm_provider != "none"
    now = datetime.now(tz=UTC)
    workers = [beat.chat for beat in heartbeat.beats() if beat.is_alive(now) and beat.chat]
    return {
        "configured": configured,
        "provider": config.llm_provider,
        "host": llm.host_of(config.llm_base_url) if configured else None,
        "model": config.llm_model,
        "this_process": llm.USAGE.counts().report(),
        "workers": llm.Counts.total(workers).report() if workers else None,
    }


def service_health() -> Health:
    worker = _worker_report()
    chat = _llm_report()
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
            worker=worker,
            llm=chat,
        )
    degraded = (
        not worker["ok"]
        or not support.enabled
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
            "knn": index.knn_path()._asdict() if support.enabled else None,
            **index.memory_index_report(),
        },
        embedding=embedding,
        worker=worker,
        llm=chat,
    )
