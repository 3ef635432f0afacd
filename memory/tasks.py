"""Background tasks (Django's tasks framework, run by `manage.py db_worker`), and the recovery
of tasks whose worker died while running them.

The task functions are entry points, like API views: they call services, and no service
imports them (services queue them through memory/scheduling.py, by path). Their paths are
stored in queued rows, so a task function keeps its name and stays in this module.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.tasks import TaskResultStatus, task
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from memory import consolidation, scheduling, summaries, vectors
from memory.embeddings import EmbeddingError
from memory.models import MainMessage, ShortTermMemory, Trigger

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
        scheduling.schedule_embedding(delay=delay)
        return 0
    if done >= ROWS_PER_RUN:
        scheduling.schedule_embedding()
    return done


@task()
def summarize_turn_task(*reply_ids: int) -> None:
    """Summarize the turns assistant replies end (one, a batch's, or those of every reply
    stored while the task waited: scheduling.schedule_summaries); then ask for each session's
    consolidation when 20 turns have passed since its last one."""
    # Replies deleted meanwhile (with their session) are not there.
    replies = list(MainMessage.objects.filter(pk__in=reply_ids).order_by("id"))
    # A run whose worker died after storing summaries is run again
    # (recover_abandoned_tasks): what it did is not done twice.
    done = set(
        ShortTermMemory.objects.filter(reply_id__in=reply_ids).values_list("reply_id", flat=True)
    )
    summaries.summarize_turns([reply for reply in replies if reply.pk not in done])
    newest = {(reply.agent_id, reply.session_id): reply for reply in replies}
    for reply in newest.values():
        consolidation.consolidate_after_turn(reply)


@task()
def consolidation_task(run_id: int) -> None:
    """Run a requested consolidation, or defer it again while the agent's window lasts."""
    consolidation.run_consolidation(run_id)


@task()
def consolidate_session_task(agent_id: str, session_id: str) -> None:
    """An end of session queued before requests were recorded (an upgrade): record it now."""
    consolidation.request_consolidation(
        agent_id=agent_id, session_id=session_id, trigger=Trigger.SESSION_END
    )


# --- tasks of workers that are gone ----------------------------------------------------------
#
# django-tasks-db marks a task RUNNING when a worker claims it and finished when it ends; a
# worker killed in between (SIGKILL, out of memory, power cut) leaves it RUNNING forever, its
# work never done. Each worker is therefore named after its process (WorkerIdentity, given to
# db_worker by memory's own `db_worker` command) and, at start, fails and queues again the
# tasks of workers of this host that provably no longer run. A worker of another host, or one
# named otherwise (`--worker-id`), cannot be checked from here: its tasks are left alone.

# A task whose workers died this many times is not queued again: it may be what kills them.
MAX_WORKER_DEATHS = 3
PROC = Path("/proc")


class WorkerGone(Exception):
    """The worker running the task stopped (killed, crashed, machine restarted) before its end."""


class OutcomeLost(Exception):
    """The task ran, but a database error kept its worker from recording how it ended."""


WORKER_GONE = f"{WorkerGone.__module__}.{WorkerGone.__qualname__}"
OUTCOME_LOST = f"{OutcomeLost.__module__}.{OutcomeLost.__qualname__}"


def _boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
    except OSError:
        return "-"


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), or None when no such process runs.

    Together with the pid it names one process: a pid is reused, a (pid, start) pair is not.
    """
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return None
    # Field 22; the second field (the command, in parentheses) may itself hold spaces.
    return stat.rpartition(")")[2].split()[19]


@dataclass(frozen=True)
class WorkerIdentity:
    """host:boot:pid:start, at most 64 characters (django-tasks-db's limit for worker ids)."""

    host: str
    boot: str
    pid: int
    start: str

    def __str__(self) -> str:
        return f"{self.host}:{self.boot}:{self.pid}:{self.start}"

    @classmethod
    def of_this_process(cls) -> WorkerIdentity:
        pid = os.getpid()
        return cls(_host(), _boot_id(), pid, _start_time(pid) or "-")

    @classmethod
    def parse(cls, text: str) -> WorkerIdentity | None:
        """The identity a worker id names, or None for ids not made by of_this_process."""
        host, *rest = text.rsplit(":", 3)
        if len(rest) != 3 or not rest[1].isdigit():
            return None
        boot, pid, start = rest
        return cls(host, boot, int(pid), start)

    def is_gone(self) -> bool:
        """True only when this worker provably no longer runs; unknown means alive."""
        if self.host != _host():
            return False  # another machine's processes cannot be seen from here
        if self.boot != "-" and _boot_id() not in ("-", self.boot):
            return True  # the machine restarted since: none of its processes survived
        if not PROC.is_dir():
            return not _pid_exists(self.pid)
        start = _start_time(self.pid)
        return start is None or (self.start != "-" and start != self.start)


def _host() -> str:
    # Leaves room for boot (12), pid (7), start (up to 20) and three colons within 64.
    return socket.gethostname()[:20]


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


@dataclass(frozen=True)
class Recovered:
    task_id: str
    task_path: str
    worker: str
    requeued_as: str | None  # None: not queued again (its workers died too often, or it is gone)


def recover_abandoned_tasks() -> list[Recovered]:
    """Fail the tasks left RUNNING by workers that are gone and queue their work again."""
    recovered = []
    for result in DBTaskResult.objects.running().order_by("started_at"):
        worker_id = result.worker_ids[-1] if result.worker_ids else ""
        worker = WorkerIdentity.parse(worker_id)
        if worker is None or not worker.is_gone():
            continue
        with transaction.atomic():
            entry = _fail_and_requeue(result, worker_id)
        if entry is not None:
            recovered.append(entry)
    return recovered


def requeue_interrupted(worker_id: str) -> list[Recovered]:
    """Fail and queue again the tasks this (live) worker left RUNNING when a database error
    kept it from recording their end: it calls this between tasks, so none of them still
    runs. Not counted as worker deaths: an outage says nothing against the task."""
    requeued = []
    for result in DBTaskResult.objects.running():
        if result.worker_ids[-1:] != [worker_id]:
            continue
        with transaction.atomic():
            failed = _mark_failed(
                result, OUTCOME_LOST, f"OutcomeLost: worker {worker_id} could not record the end"
            )
            if failed:
                again = _requeue(result)
                _settle_run(result, requeued=again is not None)
                requeued.append(Recovered(str(result.pk), result.task_path, worker_id, again))
    return requeued


def _mark_failed(result: DBTaskResult, exception_path: str, traceback: str) -> bool:
    # Conditional, so that of several workers starting together only one recovers a task.
    return bool(
        DBTaskResult.objects.filter(pk=result.pk, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.FAILED,
            finished_at=timezone.now(),
            return_value=None,
            exception_class_path=exception_path,
            traceback=traceback,
        )
    )


def _fail_and_requeue(result: DBTaskResult, worker_id: str) -> Recovered | None:
    failed = _mark_failed(
        result, WORKER_GONE, f"WorkerGone: the worker {worker_id} stopped before the task ended"
    )
    if not failed:
        return None
    # The same work (task and arguments) recovered before, until its records are pruned. The
    # embedding run has no arguments: its count spans runs, but every worker start queues
    # one anyway (Procfile).
    deaths = DBTaskResult.objects.filter(
        task_path=result.task_path, args_kwargs=result.args_kwargs, exception_class_path=WORKER_GONE
    ).count()
    requeued_as = None
    if deaths >= MAX_WORKER_DEATHS:
        logger.error(
            "Task %s (%s) was running when its worker died, %d times: not queued again",
            result.pk,
            result.task_path,
            deaths,
        )
    else:
        requeued_as = _requeue(result)
    _settle_run(result, requeued=requeued_as is not None)
    return Recovered(str(result.pk), result.task_path, worker_id, requeued_as)


def _settle_run(result: DBTaskResult, *, requeued: bool) -> None:
    """A consolidation records its own state: its run must wait again for the task queued
    again (the task only starts waiting runs), or fail when there is none."""
    if result.task_path == scheduling.CONSOLIDATION:
        (run_id,) = result.args_kwargs["args"]
        consolidation.recover_run(run_id, requeued=requeued)


def _requeue(result: DBTaskResult) -> str | None:
    """Queue the task's work again: its id, or None when its function is gone."""
    try:
        task_ = result.task
    except (ImportError, SuspiciousOperation):
        logger.error("Task %s: %s is no task any more", result.pk, result.task_path)
        return None
    arguments = result.args_kwargs
    return str(task_.enqueue(*arguments["args"], **arguments["kwargs"]).id)
