"""A task for tests that run real task workers: each run leaves a row that names it."""

from __future__ import annotations

import time

from django.tasks import task

from memory.models import MainMessage


@task
def record_run(number: int) -> None:
    time.sleep(0.2)  # long enough that the two workers of a test overlap
    MainMessage.objects.create(session_id="runs", role="user", content=f"run {number}")
