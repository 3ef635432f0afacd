"""Task workers on one PostgreSQL database: never the same task twice, never a task before
the replies it names are committed.

django-tasks-db claims a task with SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL: two
workers started together share the queue, each task run by one of them, once; a summary task
a request is adding its reply to (scheduling.schedule_summaries) is locked until it commits.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from django.db import connection, connections, transaction
from django_tasks_db.models import DBTaskResult

from memory import scheduling
from memory.models import MainMessage
from tests.helpers import ROOT, database_url, service_env
from tests.worker_tasks import record_run

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TASKS = 30


def test_two_workers_run_each_task_once(settings, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: make test runs it in its PostgreSQL pass")
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    for number in range(TASKS):
        record_run.enqueue(number)
    environment = service_env(
        tmp_path, ORCA_DATABASE_URL=database_url(), ORCA_EMBEDDING_PROVIDER="none"
    )
    command = [sys.executable, "manage.py", "db_worker", "--batch", "--no-startup-delay"]
    workers = [
        subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr.decode()

    runs = sorted(MainMessage.objects.filter(session_id="runs").values_list("content", flat=True))
    assert runs == sorted(f"run {number}" for number in range(TASKS))
    results = DBTaskResult.objects.all()
    assert {result.status for result in results} == {"SUCCESSFUL"}
    assert all(len(result.worker_ids) == 1 for result in results)
    assert len({result.worker_ids[0] for result in results}) == 2  # both took a share


def test_the_worker_cannot_claim_a_summary_task_a_reply_is_joining(settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: make test runs it in its PostgreSQL pass")
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    with transaction.atomic():
        scheduling.schedule_summaries([1])
    joined, committed = threading.Event(), threading.Event()

    def request() -> None:  # a reply stored in another connection, its transaction still open
        try:
            with transaction.atomic():
                scheduling.schedule_summaries([2])
                joined.set()
                committed.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    assert joined.wait(30)
    with transaction.atomic():  # the worker's claim, as db_worker makes it
        assert DBTaskResult.objects.ready().get_locked() is None
    committed.set()
    thread.join(30)

    with transaction.atomic():
        claimed = DBTaskResult.objects.ready().get_locked()
    assert claimed is not None and claimed.args_kwargs["args"] == [1, 2]
