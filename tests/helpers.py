"""Helpers shared by tests that run the service in processes of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


def service_env(home: Path, **env: str) -> dict[str, str]:
    """The environment of a service process of its own: ORCA_HOME=home, not the tests'."""
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    environment.update(ORCA_HOME=str(home), **env)
    return environment


def manage(
    home: Path, *args: str, check: bool = True, umask: int = -1, **env: str
) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` in its own process with ORCA_HOME=home: never the test database.

    `umask` sets the process's (-1 keeps ours)."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=service_env(home, **env),
        capture_output=True,
        text=True,
        timeout=300,
        umask=umask,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def database_url() -> str:
    """The test database's URL on PostgreSQL, for processes and connections of their own."""
    from django.db import connection

    db = connection.settings_dict
    return (
        f"postgresql://{quote(db['USER'])}:{quote(db['PASSWORD'])}@/{quote(db['NAME'])}"
        f"?host={quote(db['HOST'])}"
    )
