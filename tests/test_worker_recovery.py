"""A task left RUNNING by a worker that died is failed and its work queued again, at start."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from memory import consolidation, scheduling, tasks
from memory.models import ConsolidationRun, LongTermMemory, RunStatus, ShortTermMemory
from memory.tasks import (
    WorkerGone,
    WorkerIdentity,
    embed_pending_task,
    recover_abandoned_tasks,
    summarize_turn_task,
)
from tests.factories import add_message
from tests.helpers import ROOT, manage, service_env, worker_hanging_on_the_chat_model

GONE = f"{WorkerGone.__module__}.{WorkerGone.__qualname__}"
DB_BACKEND = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


@pytest.fixture
def queued(settings, db):
    """The real queue (django-tasks-db) instead of the tests' immediate backend."""
    settings.TASKS = DB_BACKEND


def this_worker() -> WorkerIdentity:
    return WorkerIdentity.of_this_process()


def dead_worker() -> WorkerIdentity:
    """A worker of this host and boot whose pid no process can have (above pid_max)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    return WorkerIdentity(this_worker().host, this_worker().boot, pid_max + 1, "12345")


def running(worker_id: str | None) -> DBTaskResult:
    """An embedding run claimed by that worker, as db_worker claims it."""
    result = DBTaskResult.objects.get(pk=embed_pending_task.enqueue().id)
    if worker_id is not None:
        result.claim(worker_id)
    else:
        DBTaskResult.objects.filter(pk=result.pk).update(status=TaskResultStatus.RUNNING)
    return result


def test_a_task_left_running_by_a_dead_worker_is_failed_and_queued_again(queued):
    abandoned = running(str(dead_worker()))

    (entry,) = recover_abandoned_tasks()

    abandoned.refresh_from_db()
    assert abandoned.status == TaskResultStatus.FAILED
    assert abandoned.exception_class_path == GONE
    assert str(dead_worker()) in abandoned.traceback
    assert abandoned.finished_at is not None
    again = DBTaskResult.objects.get(pk=entry.requeued_as)
    assert again.status == TaskResultStatus.READY
    assert (again.task_path, again.args_kwargs) == (abandoned.task_path, abandoned.args_kwargs)
    assert entry.task_id == str(abandoned.pk) and entry.worker == str(dead_worker())


def test_a_process_that_reused_the_dead_workers_pid_does_not_keep_its_task(queued):
    me = this_worker()
    reused = WorkerIdentity(me.host, me.boot, me.pid, str(int(me.start) + 1))
    abandoned = running(str(reused))

    assert [entry.task_id for entry in recover_abandoned_tasks()] == [str(abandoned.pk)]
    assert DBTaskResult.objects.get(pk=abandoned.pk).status == TaskResultStatus.FAILED


def test_a_worker_of_a_previous_boot_is_gone(queued):
    me = this_worker()
    abandoned = running(str(WorkerIdentity(me.host, "0" * 12, me.pid, me.start)))

    assert [entry.task_id for entry in recover_abandoned_tasks()] == [str(abandoned.pk)]


# Workers whose tasks must stay RUNNING: they run, or nothing here can tell.
LIVE_OR_UNKNOWABLE = {
    "this very process": lambda: str(this_worker()),
    "another host": lambda: str(WorkerIdentity("elsewhere", "abc", 2**22 + 1, "1")),
    "a random id (the package's default)": lambda: "V5wQ0mJx1fS9kPq2Lr7tYc3Zb8Ud4Ne6",
    "an id given with --worker-id": lambda: "worker-1",
    "no worker at all": lambda: None,
}


@pytest.mark.parametrize("worker", LIVE_OR_UNKNOWABLE.values(), ids=LIVE_OR_UNKNOWABLE.keys())
def test_tasks_of_workers_alive_elsewhere_or_unnamed_are_left_alone(queued, worker):
    result = running(worker())

    assert recover_abandoned_tasks() == []
    assert DBTaskResult.objects.get(pk=result.pk).status == TaskResultStatus.RUNNING
    assert DBTaskResult.objects.count() == 1


def test_a_task_whose_workers_died_three_times_is_not_queued_again(queued):
    running(str(dead_worker()))
    for _ in range(tasks.MAX_WORKER_DEATHS - 1):
        (entry,) = recover_abandoned_tasks()
        # The next worker claims the work again, and dies of it too.
        DBTaskResult.objects.get(pk=entry.requeued_as).claim(str(dead_worker()))

    (entry,) = recover_abandoned_tasks()

    assert entry.requeued_as is None
    assert DBTaskResult.objects.filter(exception_class_path=GONE).count() == 3
    assert not DBTaskResult.objects.filter(status=TaskResultStatus.READY).exists()


def test_workers_starting_together_recover_a_task_once(queued):
    abandoned = running(str(dead_worker()))
    seen_by_both = DBTaskResult.objects.get(pk=abandoned.pk)

    first = tasks._fail_and_requeue(seen_by_both, str(dead_worker()))
    second = tasks._fail_and_requeue(seen_by_both, str(dead_worker()))

    assert first is not None and second is None
    assert DBTaskResult.objects.filter(status=TaskResultStatus.READY).count() == 1


def test_a_worker_id_fits_the_packages_limit_and_names_this_process():
    me = this_worker()

    assert len(str(me)) <= 64
    assert WorkerIdentity.parse(str(me)) == me
    assert not me.is_gone()
    assert dead_worker().is_gone()


def test_a_summary_run_again_after_its_worker_died_is_not_stored_twice(conversation):
    summarize_turn_task.call(conversation.reply.pk)
    summarize_turn_task.call(conversation.reply.pk)

    assert ShortTermMemory.objects.filter(reply_id=conversation.reply.pk).count() == 1


# --- a consolidation run whose worker died ----------------------------------------------------

PREFERENCE = "I prefer green tea in the morning."


def consolidation_left_running(
    worker: WorkerIdentity, *, finished: bool = False
) -> tuple[ConsolidationRun, DBTaskResult]:
    """A session's consolidation as a worker leaves it when killed during its task: the task
    claimed (RUNNING) and the run started (`running`, its memories not written), or, when
    `finished`, the run done and the worker killed before it recorded the task's end."""
    add_message(PREFERENCE, session_id="s1")
    run = consolidation.request_consolidation(agent_id="a1", session_id="s1", trigger="session_end")
    result = DBTaskResult.objects.get(task_path=scheduling.CONSOLIDATION)
    result.claim(str(worker))
    if finished:
        assert consolidation.run_consolidation(run.pk) is not None
    else:
        assert consolidation._claim(run.pk, timezone.now()) is not None
    run.refresh_from_db()
    assert run.status == (RunStatus.DONE if finished else RunStatus.RUNNING)
    return run, result


def run_requeued(entry: tasks.Recovered) -> None:
    """The task queued again, run as the next worker runs it."""
    again = DBTaskResult.objects.get(pk=entry.requeued_as)
    again.task.call(*again.args_kwargs["args"], **again.args_kwargs["kwargs"])


def test_a_consolidation_whose_worker_died_is_queued_again_as_the_same_run_and_done_once(queued):
    run, _ = consolidation_left_running(dead_worker())

    (entry,) = recover_abandoned_tasks()

    run.refresh_from_db()
    assert (run.status, run.reason) == (RunStatus.QUEUED, consolidation.REQUEUED_REASON)
    assert LongTermMemory.objects.count() == 0
    run_requeued(entry)
    run_requeued(entry)  # a second delivery of the same task finds the run done

    run.refresh_from_db()
    assert (run.status, run.created) == (RunStatus.DONE, 1)
    assert list(LongTermMemory.objects.values_list("content", flat=True)) == [PREFERENCE]
    assert ConsolidationRun.objects.count() == 1


def test_a_consolidation_that_had_finished_when_its_worker_died_is_not_redone(queued):
    run, _ = consolidation_left_running(dead_worker(), finished=True)

    (entry,) = recover_abandoned_tasks()
    run_requeued(entry)

    again = ConsolidationRun.objects.get(pk=run.pk)
    assert (again.status, again.finished_at, again.created) == (RunStatus.DONE, run.finished_at, 1)
    assert LongTermMemory.objects.count() == 1
    assert ConsolidationRun.objects.count() == 1


def test_a_consolidation_whose_workers_died_too_often_fails_and_frees_the_session(queued):
    run, result = consolidation_left_running(dead_worker())
    for _ in range(tasks.MAX_WORKER_DEATHS - 1):
        (entry,) = recover_abandoned_tasks()
        DBTaskResult.objects.get(pk=entry.requeued_as).claim(str(dead_worker()))
        assert consolidation._claim(run.pk, timezone.now()) is not None

    (entry,) = recover_abandoned_tasks()

    assert entry.requeued_as is None
    run.refresh_from_db()
    assert (run.status, run.reason) == (RunStatus.FAILED, consolidation.GIVEN_UP_REASON)
    again = consolidation.request_consolidation(
        agent_id="a1", session_id="s1", trigger="session_end"
    )
    assert again.pk != run.pk


def test_a_dead_run_of_a_session_that_waits_again_is_covered_by_the_waiting_run(
    queued, monkeypatch
):
    run, _ = consolidation_left_running(dead_worker())
    add_message("I decided to take the train.", session_id="s1")
    waiting = consolidation.request_consolidation(
        agent_id="a1", session_id="s1", trigger="session_end"
    )
    assert waiting.pk != run.pk

    recover_abandoned_tasks()

    run.refresh_from_db()
    assert (run.status, run.reason) == (RunStatus.FAILED, consolidation.JOINED_REASON)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.reason) == (RunStatus.DEFERRED, consolidation.WINDOW_REASON)
    monkeypatch.setattr(timezone, "now", lambda: waiting.run_after)  # its task runs then
    consolidation.run_consolidation(waiting.pk)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.created) == (RunStatus.DONE, 2)
    assert LongTermMemory.objects.count() == 2


# --- the real worker, killed ---------------------------------------------------------------


def task_rows(db_path: Path) -> list[dict[str, object]]:
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as connection:
        connection.row_factory = sqlite3.Row
        rows = connection.execute(
            "SELECT id, status, task_path, worker_ids, exception_class_path "
            f"FROM {DBTaskResult._meta.db_table} ORDER BY enqueued_at"
        ).fetchall()
    return [dict(row) for row in rows]


def wait_until(condition, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, "the worker stopped by itself"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_workers_task_is_failed_and_run_again_by_the_next_worker(tmp_path):
    home = tmp_path / "orca"
    db_path = home / "data" / "orca.db"
    manage(home, "migrate", "--no-input")
    manage(home, "migrate_jsonl", "examples/jsonl/trip-planning.jsonl", "--agent", "a1")
    # An embedding server that takes connections and never answers: the first worker hangs
    # in its task, as one does in a slow call when it is killed.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    provider = {
        "ORCA_EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
        "OPENAI_EMBEDDING_MODEL": "silent",
        "ORCA_EMBEDDING_DIM": "8",
    }
    # As the Procfile's worker line does at start, with the provider it will embed with.
    manage(home, "embed_pending", "--enqueue", **provider)
    hanging = service_env(home, **provider)
    first = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-startup-delay", "--interval", "0.2"],
        cwd=ROOT,
        env=hanging,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: [r["status"] for r in task_rows(db_path)] == ["RUNNING"], first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        silent.close()
    (killed,) = task_rows(db_path)
    (killed_worker,) = json.loads(killed["worker_ids"])
    assert WorkerIdentity.parse(killed_worker).pid == first.pid

    # The next worker (lexical-only now) recovers it, runs it again and, with --batch, stops.
    second = manage(home, "db_worker", "--batch", "--no-startup-delay")

    rows = {row["id"]: row for row in task_rows(db_path)}
    assert rows.pop(killed["id"])["status"] == "FAILED"
    (again,) = rows.values()
    assert (again["status"], again["task_path"]) == ("SUCCESSFUL", killed["task_path"])
    assert f"left running by worker {killed_worker}, which is gone" in second.stderr
    assert task_rows(db_path)[0]["exception_class_path"] == GONE


def consolidation_runs(db_path: Path) -> list[dict[str, object]]:
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as connection:
        connection.row_factory = sqlite3.Row
        rows = connection.execute(
            "SELECT id, status, extractor, created, merged, reason FROM "
            f"{ConsolidationRun._meta.db_table} ORDER BY id"
        ).fetchall()
    return [dict(row) for row in rows]


def long_term_memories(db_path: Path) -> list[str]:
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as connection:
        return [
            content
            for (content,) in connection.execute(
                f"SELECT content FROM {LongTermMemory._meta.db_table} ORDER BY id"
            )
        ]


@pytest.mark.slow
def test_a_worker_killed_during_a_consolidation_has_it_done_once_by_the_next_worker(tmp_path):
    home = tmp_path / "orca"
    db_path = home / "data" / "orca.db"
    offline = {"ORCA_EMBEDDING_PROVIDER": "none"}
    manage(home, "migrate", "--no-input")
    manage(home, "migrate_jsonl", "examples/jsonl/trip-planning.jsonl", "--agent", "a1")
    manage(
        home,
        "shell",
        "-c",
        # The turns' summaries (offline), which the chat model's extraction reads, and the
        # session's end.
        "from memory import consolidation, summaries; "
        "from memory.models import MainMessage; "
        "replies = list(MainMessage.objects.filter(role='assistant')); "
        "summaries.summarize_turns(replies); "
        "consolidation.request_consolidation("
        "agent_id='a1', session_id=replies[0].session_id, trigger='session_end')",
        **offline,
    )
    # The first worker hangs in the run's extraction, and is killed there.
    with worker_hanging_on_the_chat_model(home, **offline) as first:
        wait_until(
            lambda: [run["status"] for run in consolidation_runs(db_path)] == ["running"], first
        )
    assert long_term_memories(db_path) == []

    # The next worker (offline: the rule extractor) recovers the task and redoes the same run.
    second = manage(home, "db_worker", "--batch", "--no-startup-delay", **offline)

    assert "consolidation_task) was left running by worker" in second.stderr
    (run,) = consolidation_runs(db_path)
    assert (run["status"], run["extractor"], run["merged"]) == ("done", "rules", 0)
    memories = long_term_memories(db_path)
    assert run["created"] == len(memories) > 0
    # A third worker finds nothing left to do: the run is not done again.
    manage(home, "db_worker", "--batch", "--no-startup-delay", **offline)
    assert consolidation_runs(db_path) == [run]
    assert long_term_memories(db_path) == memories
