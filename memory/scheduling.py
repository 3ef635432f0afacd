"""Queueing background work: what services call to have a task of memory/tasks.py run.

The task functions call services (vectors, summaries, consolidation), and services queue those
tasks: if services imported the task functions, each would import itself back through them
(the cycle consolidation -> tasks -> consolidation). So this module imports no service and no task
function. It names each task by its path, the string django-tasks-db stores in every queued
row and the worker imports to run it: a contract already, since rows queued by an older
version name these paths (tests/test_import_graph.py checks that each names a task).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from django.db import transaction
from django.tasks import Task, TaskResultStatus
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from memory import embeddings
from memory.models import ConsolidationRun, RunStatus

EMBED_PENDING = "memory.tasks.embed_pending_task"
SUMMARIZE_TURN = "memory.tasks.summarize_turn_task"
CONSOLIDATION = "memory.tasks.consolidation_task"
TASK_PATHS = (EMBED_PENDING, SUMMARIZE_TURN, CONSOLIDATION)
# Replies a waiting summary task takes on at most (a batch of messages may queue more in a
# task of its own): the task stays a short run, even when a chat model writes each summary.
REPLIES_PER_SUMMARY_TASK = 50


def task_at(path: str) -> Task:
    """The task a path names, imported when work is queued, as the worker imports it to run it."""
    task_ = import_string(path)
    if not isinstance(task_, Task):
        raise TypeError(f"{path} is not a task")
    return task_


def tasks_in_database() -> bool:
    """Whether queued tasks are rows of the database, run by `db_worker` (django-tasks-db),
    rather than run at once (the immediate backend of tests)."""
    return isinstance(task_at(EMBED_PENDING).get_backend(), DatabaseBackend)


def with_the_write(schedule: Callable[[], None]) -> None:
    """Queue the work rows being written need (`schedule`), with them.

    Where tasks are rows of this database (django-tasks-db), in the caller's transaction:
    the task commits with the rows or neither does, and a write costs one transaction, not
    two. Otherwise (the immediate backend of tests runs a task at once) after the commit, so
    that the task finds the rows, and a failing task never fails the write.
    """
    if tasks_in_database():
        schedule()
    else:
        transaction.on_commit(schedule, robust=True)


def _embedding_waits() -> bool:
    # A waiting run embeds what is pending (and queues the next while a backlog remains), so
    # a second waiting run would only repeat it. This keeps a burst of messages, or an
    # outage's retries, from piling up runs in the queue.
    return DBTaskResult.objects.filter(
        status=TaskResultStatus.READY, task_path=EMBED_PENDING
    ).exists()


def schedule_embedding(*, delay: timedelta | None = None) -> None:
    """Queue a run of embed_pending_task unless one is already waiting, or no provider is
    configured (the worker queues one at start, so a provider configured later finds what
    waits)."""
    if embeddings.configured_embedder() is None or _embedding_waits():
        return
    task_ = task_at(EMBED_PENDING)
    if delay is not None:
        if not task_.get_backend().supports_defer:
            return  # the immediate backend (tests) cannot wait; the next message retries
        task_ = task_.using(run_after=timezone.now() + delay)
    task_.enqueue()


def schedule_summaries(reply_ids: Sequence[int]) -> None:
    """Have the turns the assistant replies `reply_ids` end summarized: by the summary task
    still waiting in the queue, when there is one with room, else by a new task.

    Joining the waiting task keeps the worker's cost per turn small when replies arrive
    faster than it runs tasks: one task, one claim, one transaction for many turns. The
    waiting row is locked until the caller's transaction ends, so the worker cannot start
    it before the replies it now names are committed (on SQLite the write transaction
    already excludes the worker's claim; PostgreSQL's worker skips locked rows).
    """
    # No savepoint of its own: the caller's transaction (with_the_write) is the one that counts.
    with transaction.atomic(savepoint=False):
        waiting = (
            DBTaskResult.objects.select_for_update(skip_locked=True)
            .filter(status=TaskResultStatus.READY, task_path=SUMMARIZE_TURN)
            .order_by("-enqueued_at")  # the newest: those queued before it filled up first
            .values_list("pk", "args_kwargs")
            .first()
        )
        if waiting is not None:
            pk, arguments = waiting
            named = arguments["args"]
            if len(named) + len(reply_ids) <= REPLIES_PER_SUMMARY_TASK:
                joined = {"args": [*named, *reply_ids], "kwargs": {}}
                DBTaskResult.objects.filter(pk=pk).update(args_kwargs=joined)
                return
        task_at(SUMMARIZE_TURN).enqueue(*reply_ids)


def schedule_consolidation(run: ConsolidationRun) -> None:
    """Queue the run's task: now when it is queued, at `run_after` when it is deferred."""
    task_ = task_at(CONSOLIDATION)
    if run.status == RunStatus.DEFERRED:
        if not task_.get_backend().supports_defer:
            return  # the immediate backend (tests) cannot wait: tests call the task at run_after
        task_ = task_.using(run_after=run.run_after)
    task_.enqueue(run.pk)
