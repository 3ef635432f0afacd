"""Pointing this process at a fresh, migrated database: for evaluations and benchmarks."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command
from django.db import connections


def use_temporary_database(path: Path) -> None:
    """Switch the default connection to a new database file at `path` and migrate it.

    For commands that must never touch the user's data; the process keeps using `path`
    until it exits.
    """
    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = path
    call_command("migrate", verbosity=0, interactive=False)
