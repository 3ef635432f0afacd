"""`manage.py db_worker`: django-tasks-db's worker, named after its process, recovering at start
the tasks that workers which are gone left running (memory.tasks.recover_abandoned_tasks), and
never stopped by the database: locked beyond the busy timeout, gone, full, or a PostgreSQL
restart, it logs, backs off and polls again (`ResilientWorker`).

It replaces the package's command of the same name (the `memory` app comes first in
INSTALLED_APPS), so the Procfile, the load test and anyone typing `db_worker` get it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DatabaseError, InterfaceError, connections
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django_tasks_db.management.commands import db_worker
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    stop_never,
    wait_exponential,
)

from memory import heartbeat
from memory.tasks import WorkerIdentity, recover_abandoned_tasks, requeue_interrupted

logger = logging.getLogger(__name__)

# The wait after a database error doubles from the first to the most, while errors last.
FIRST_WAIT_SECONDS = 1
MOST_WAIT_SECONDS = 30
# How long `--batch` keeps trying through database errors before it fails.
BATCH_GIVES_UP_SECONDS = 300


class ResilientWorker(db_worker.Worker):
    """The package's worker, whose loop a database error would end (and with it `make run`):
    here it waits and polls again, for as long as the database stays away. Before polling,
    at start and after each error, it fails and queues again the tasks of workers that are
    gone and its own tasks whose outcome an error kept from being recorded (a task may run
    twice, never zero times: each checks what is already done). `report` says so."""

    def __init__(self, *, report: Callable[[str], None], **options: Any) -> None:
        super().__init__(**options)
        self.report = report
        self.heart = heartbeat.Heart(self.worker_id)

    def run(self) -> None:
        self.heart.start()
        try:
            for attempt in Retrying(
                retry=retry_if_exception_type((DatabaseError, InterfaceError)),
                wait=wait_exponential(min=FIRST_WAIT_SECONDS, max=MOST_WAIT_SECONDS),
                # `--batch` (a script's, an evaluation's) gives up in the end, with the error.
                stop=stop_after_delay(BATCH_GIVES_UP_SECONDS) if self.batch else stop_never,
                before_sleep=self._failed,
                reraise=True,
            ):
                with attempt:
                    self._recover()
                    self.heart.recovered()
                    super().run()
        finally:
            self.heart.stop()

    def _recover(self) -> None:
        for entry in recover_abandoned_tasks():
            again = f"queued again as {entry.requeued_as}" if entry.requeued_as else "not queued"
            self.report(
                f"Task {entry.task_id} ({entry.task_path}) was left running by worker "
                f"{entry.worker}, which is gone: marked failed, {again}."
            )
        for entry in requeue_interrupted(self.worker_id):
            self.report(
                f"Task {entry.task_id} ({entry.task_path}) was interrupted by a database "
                f"error: marked failed, queued again as {entry.requeued_as}."
            )

    def _failed(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        logger.error(
            "The database failed the task worker (%s): polling again in %.0f s",
            error,
            state.upcoming_sleep,
        )
        self.heart.failed(f"{type(error).__name__}: {error}")
        for connection in connections.all(initialized_only=True):
            with contextlib.suppress(DatabaseError, InterfaceError):
                connection.close()  # a broken connection is opened anew


class Command(db_worker.Command):
    help = (
        "Run the background task worker; first fail and queue again the tasks left running "
        "by workers of this host that are gone. Database errors never stop it: it backs off "
        "and polls again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        # The package's default is a random string, which says nothing about whether its
        # worker still runs; this one names the process (computed in the worker's own process).
        parser.set_defaults(worker_id=str(WorkerIdentity.of_this_process()))

    def handle(self, *args: Any, **options: Any) -> None:
        """The package's handle, with ResilientWorker."""
        self.configure_logging(options["verbosity"])
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = ResilientWorker(
            report=self.stderr.write,
            queue_names=queue_names,
            interval=options["interval"],
            batch=options["batch"],
            backend_name=options["backend_name"],
            startup_delay=options["startup_delay"],
            max_tasks=options["max_tasks"],
            worker_id=options["worker_id"],
            excluded_queue_names=excluded,
        )
        if options["reload"] and not options["batch"]:
            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()  # in the reloaded child only
            run_with_reloader(worker.run)
        else:
            worker.configure_signals()
            worker.run()
