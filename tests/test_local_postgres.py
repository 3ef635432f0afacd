"""`manage.py local_postgres`: starts a PostgreSQL in $ORCA_HOME/postgres; `--stop` stops it."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.helpers import last_line, manage


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

        stopped = manage(home, "local_postgres", "--stop")

        assert f"Stopped the PostgreSQL server in {pgdata}." in stopped.stderr
        assert gone(server)
        assert postmaster(pgdata) is None
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=5)

        again = manage(home, "local_postgres", "--stop")

        assert f"The PostgreSQL server in {pgdata} is not running: nothing to stop." in again.stderr
        assert postmaster(pgdata) is None  # not started to be stopped
    finally:
        if server is not None and not gone(server):
            server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
