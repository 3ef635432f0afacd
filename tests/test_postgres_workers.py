"""Several task workers on one PostgreSQL database never run the same task twice.

django-tasks-db claims a task with SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL: two
workers started together share the queue, each task run by one of them, once.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import connection
from django_tasks_db.models import DBTaskResult

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
