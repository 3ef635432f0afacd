"""`manage.py local_postgres`: starts a PostgreSQL in $ORCA_HOME/postgres with the settings the
service checks and records its URL in the home; `--stop` stops it, `--forget` forgets it,
`--if-recorded` (`make run`) starts it again."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import psycopg
import pytest

from memory.management.commands.local_postgres import machine_bytes
from memory.server_settings import MB, SERVER_SETTINGS
from orca_memory.core.config import RECORDED_URL_FILE
from tests.helpers import last_line, manage

# Whatever the test runner's environment: as in a shell without a login session (ssh, cron,
# containers), where platformdirs warned on every start and stop.
NO_RUNTIME_DIR = {"XDG_RUNTIME_DIR": ""}


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # exited, its parent not told yet
    except psutil.NoSuchProcess:
        return True


def postmaster(pgdata: Path) -> psutil.Process | None:
    """The server's main process while it runs (postmaster.pid names it), else None."""
    try:
        process = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    except (FileNotFoundError, psutil.NoSuchProcess):
        return None
    return None if gone(process) else process


@pytest.mark.slow
def test_stop_stops_the_server_and_a_second_stop_starts_none(tmp_path):
    home = tmp_path / "orca"
    pgdata = home / "postgres"
    url = last_line(manage(home, "local_postgres"))
    server = postmaster(pgdata)
    try:
        assert server is not None
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)

        stopped = manage(home, "local_postgres", "--stop", **NO_RUNTIME_DIR)

        assert f"Stopped the PostgreSQL server in {pgdata}." in stopped.stderr
        assert "`make run` starts it again" in stopped.stderr  # the home still uses it
        assert "Warning" not in stopped.stderr
        assert gone(server)
        assert postmaster(pgdata) is None
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=5)

        again = manage(home, "local_postgres", "--stop")

        assert f"The PostgreSQL server in {pgdata} is not running: nothing to stop." in again.stderr
        assert postmaster(pgdata) is None  # not started to be stopped

        resumed = manage(home, "local_postgres", "--if-recorded")  # `make run`'s first step

        assert f"database: the local PostgreSQL in {pgdata}" in resumed.stdout
        assert "local_postgres --forget" in resumed.stdout
        server = postmaster(pgdata)
        assert server is not None
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    finally:
        if server is not None and not gone(server):
            server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown


@pytest.mark.slow
def test_every_later_command_of_the_home_uses_the_recorded_server_until_it_is_forgotten(
    tmp_path,
):
    home = tmp_path / "orca"
    pgdata = home / "postgres"
    started = manage(home, "local_postgres", **NO_RUNTIME_DIR)
    url = last_line(started)
    try:
        assert (home / RECORDED_URL_FILE).read_text().strip() == url
        assert "Warning" not in started.stderr  # platformdirs' RuntimeDirWarning among them
        with psycopg.connect(url) as connection:
            # What the service checks, set by the command; shared_buffers a quarter of the
            # machine's memory where that is more than the minimum.
            sizes = {
                setting.name: connection.execute(
                    "SELECT pg_size_bytes(current_setting(%s))", [setting.name]
                ).fetchone()[0]
                for setting in SERVER_SETTINGS
            }
        assert sizes == {
            "shared_buffers": max(512 * MB, machine_bytes() // 4 // MB * MB),
            "maintenance_work_mem": 512 * MB,
        }

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("ALTER SYSTEM SET maintenance_work_mem = '1GB'")
            connection.execute("SELECT pg_reload_conf()")
        assert last_line(manage(home, "local_postgres")) == url  # found running, as it was
        with psycopg.connect(url) as connection:  # a value someone raised stays
            assert connection.execute("SHOW maintenance_work_mem").fetchone() == ("1GB",)

        # The commands the start banner and the README print, with nothing but ORCA_HOME.
        migrated = manage(home, "migrate", "--no-input", **NO_RUNTIME_DIR)
        key = manage(home, "create_api_key", "--agent", "agent-1")

        assert "WARNINGS" not in migrated.stderr + migrated.stdout
        assert "orca.W00" not in migrated.stderr + migrated.stdout
        assert "created" in key.stderr
        with psycopg.connect(url) as connection:
            agents = connection.execute("SELECT agent_id FROM api_keys").fetchall()
        assert agents == [("agent-1",)]
        assert not (home / "data" / "orca.db").exists()
        shown = manage(home, "local_postgres", "--if-recorded").stdout
        assert f"database: the local PostgreSQL in {pgdata}" in shown

        forgotten = manage(home, "local_postgres", "--forget")

        assert "uses SQLite" in forgotten.stderr
        assert not (home / RECORDED_URL_FILE).exists()
        assert (pgdata / "PG_VERSION").exists()  # the server's data stay
        shown = manage(home, "local_postgres", "--if-recorded").stdout
        assert f"database: SQLite, {home / 'data' / 'orca.db'}" in shown
        with psycopg.connect(url) as connection:  # forgetting stops nothing
            assert connection.execute("SELECT count(*) FROM api_keys").fetchone() == (1,)
    finally:
        manage(home, "local_postgres", "--stop")
