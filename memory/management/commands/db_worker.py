"""`manage.py db_worker`: django-tasks-db's worker, named after its process, recovering at start
the tasks that workers which are gone left running (memory.tasks.recover_abandoned_tasks).

It replaces the package's command of the same name (the `memory` app comes first in
INSTALLED_APPS), so the Procfile, the load test and anyone typing `db_worker` get it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser
from django_tasks_db.management.commands import db_worker

from memory.tasks import WorkerIdentity, recover_abandoned_tasks


class Command(db_worker.Command):
    help = (
        "Run the background task worker; first fail and queue again the tasks left running "
        "by workers of this host that are gone."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        # The package's default is a random string, which says nothing about whether its
        # worker still runs; this one names the process (computed in the worker's own process).
        parser.set_defaults(worker_id=str(WorkerIdentity.of_this_process()))

    def handle(self, *args: Any, **options: Any) -> None:
        for entry in recover_abandoned_tasks():
            again = f"queued again as {entry.requeued_as}" if entry.requeued_as else "not queued"
            self.stderr.write(
                f"Task {entry.task_id} ({entry.task_path}) was left running by worker "
                f"{entry.worker}, which is gone: marked failed, {again}."
            )
        super().handle(*args, **options)
