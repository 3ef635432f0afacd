"""`manage.py backup PATH`: a consistent copy of the live database, taken while it serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from orca_memory.core.db.base import Driver
from orca_memory.core.files import create_private_file, private_dir


def backup_database(target: Path) -> str:
    """Copy the database with SQLite's online backup API; returns the copy's integrity check.

    The backup runs in one step, inside one read transaction, so writes going on meanwhile
    are either wholly in the copy or wholly not. The copy is a new file, 0600 (in 0700
    folders where they are created), like the database itself.
    """
    connection.ensure_connection()
    private_dir(target.parent)
    create_private_file(target, exclusive=True)
    copy = Driver.connect(str(target))
    try:
        connection.connection.backup(copy, pages=-1)
        (result,) = copy.execute("PRAGMA integrity_check").fetchone()
    finally:
        copy.close()
    return result


class Command(BaseCommand):
    help = "Write a consistent copy of the database to PATH (a new file), then check it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        target: Path = options["path"]
        if connection.vendor != "sqlite":
            raise CommandError(
                "backup copies the SQLite file; on PostgreSQL use pg_dump, or "
                "`manage.py copy_database --to PATH` for a SQLite copy (docs/DEPLOYMENT.md)"
            )
        try:
            result = backup_database(target)  # creates the file exclusively: never overwrites
        except FileExistsError as exc:
            raise CommandError(
                f"{target} exists; choose a new file (nothing is overwritten)"
            ) from exc
        if result != "ok":
            raise CommandError(f"the copy at {target} failed its integrity check: {result}")
        self.stdout.write(f"Backed up to {target} ({target.stat().st_size:,} bytes); integrity ok.")
