"""Pointing this process at a fresh, migrated database: for evaluations and benchmarks."""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from django.core.management import call_command
from django.db import connections


def use_temporary_database(path: Path) -> None:
    """Switch the default connection to a new, migrated database and use it until exit.

    On SQLite a new file at `path`; on PostgreSQL a new database on the configured server,
    named after `path` and this process, dropped when the process exits. For commands that
    must never touch the user's data.
    """
    connection = connections["default"]
    connection.close()
    if connection.vendor == "postgresql":
        name = f"orca_{path.stem}_{os.getpid()}"
        with connection._nodb_cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        atexit.register(_drop_database, name)
        connection.settings_dict["NAME"] = name
    else:
        connection.settings_dict["NAME"] = path
    call_command("migrate", verbosity=0, interactive=False)


def _drop_database(name: str) -> None:
    connection = connections["default"]
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
