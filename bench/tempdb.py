"""Pointing this process at a fresh, migrated database: for evaluations and benchmarks."""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from django.core.management import call_command
from django.db import connections

from memory import index


def use_temporary_database(path: Path) -> None:
    """Switch the default connection to a new, migrated database and use it until exit.

    On SQLite a new file at `path`; on PostgreSQL a new database on the configured server,
    named after `path` and this process, dropped when the process exits. For commands that
    must never touch the user's data.
    """
    if connections["default"].vendor == "postgresql":
        name = create_database(path.stem)
        atexit.register(drop_database, name)
        point_at(name)
    else:
        point_at(path)
    call_command("migrate", verbosity=0, interactive=False)


def point_at(name: str | Path) -> None:
    """Point the default connection at another database (a file on SQLite), its connections
    closed first: this thread's and the one that runs text queries beside it
    (index.close_beside), which would otherwise stay on the database before."""
    index.close_beside()
    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = name


def create_database(stem: str) -> str:
    """A new, empty database on the configured PostgreSQL server; returns its name."""
    name = f"orca_{stem}_{os.getpid()}"
    with connections["default"]._nodb_cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    index.close_beside()  # PostgreSQL drops no database while a connection is on it
    connection = connections["default"]
    connection.close()
    with connection._nodb_cursor() as cursor:
        # FORCE: at exit, the connection of index.close_beside's thread, which ended before
        # this ran, may still be open.
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(url: str, name: str) -> str:
    """`url` (an ORCA_DATABASE_URL) naming the database `name` instead of its own."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "dbname"]
    return urlunsplit(parts._replace(path=f"/{quote(name)}", query=urlencode(query)))
