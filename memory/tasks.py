"""Background tasks (Django's tasks framework, run by `manage.py db_worker`)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.tasks import TaskResultStatus, task
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from memory import maintenance, vectors
from memory.embeddings import EmbeddingError
from memory.models import ConsolidationRun, MainMessage, RunStatus

logger = logging.getLogger(__name__)


# Rows per run: a run stays short (the worker stops gracefully between runs, not within
# one), and the next run is queued while a backlog remains.
ROWS_PER_RUN = 200


@task()
def embed_pending_task() -> int:
    """Embed pending rows. When the provider fails, try again later with backoff."""
    try:
        done = vectors.embed_pending(limit=ROWS_PER_RUN)
    except EmbeddingError as exc:
        delay = vectors.retry_delay()
        logger.warning("Embedding failed (%s); retrying in %s", exc, delay)
        schedule_embedding(delay=delay)
        return 0
    if done >= ROWS_PER_RUN:
        schedule_embedding()
    return done


def _already_scheduled() -> bool:
    # A waiting run embeds what is pending (and queues the next while a backlog remains), so
    # a second waiting run would only repeat it. This keeps a burst of messages, or an
    # outage's retries, from piling up runs in the queue.
    return DBTaskResult.objects.filter(
        status=TaskResultStatus.READY, task_path=embed_pending_task.module_path
    ).exists()


def schedule_embedding(*, delay: timedelta | None = None) -> None:
    """Queue a run of embed_pending_task unless one is already waiting."""
    if _already_scheduled():
        return
    task_ = embed_pending_task
    if delay is not None:
        if not task_.get_backend().supports_defer:
            return  # the immediate backend (tests) cannot wait; the next message retries
        task_ = task_.using(run_after=timezone.now() + delay)
    task_.enqueue()


@task()
def summarize_turn_task(reply_id: int) -> None:
    """Summarize the turn an assistant reply ends; every 20 turns, ask for a consolidation."""
    reply = MainMessage.objects.filter(pk=reply_id).first()
    if reply is None:
        return  # the session was deleted meanwhile
    maintenance.summarize_turn(reply)
    maintenance.consolidate_after_turn(reply)


@task()
def consolidation_task(run_id: int) -> None:
    """Run a requested consolidation, or defer it again while the agent's window lasts."""
    maintenance.run_consolidation(run_id)


def schedule_consolidation(run: ConsolidationRun) -> None:
    """Queue the run's task: now when it is queued, at `run_after` when it is deferred."""
    task_ = consolidation_task
    if run.status == RunStatus.DEFERRED:
        if not task_.get_backend().supports_defer:
            return  # the immediate backend (tests) cannot wait: tests call the task at run_after
        task_ = task_.using(run_after=run.run_after)
    task_.enqueue(run.pk)


@task()
def consolidate_session_task(agent_id: str, session_id: str) -> None:
    """An end of session queued before requests were recorded (an upgrade): record it now."""
    maintenance.request_consolidation(
        agent_id=agent_id, session_id=session_id, trigger="session_end"
    )
