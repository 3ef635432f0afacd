"""`manage.py copy_database --to URL`: copy this store to another database (memory.copying)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.copying import CopyError, database_copy


class Command(BaseCommand):
    help = (
        "Copy every table of this store (messages, transcripts, summaries, memories and their "
        "history, keys, users, vectors) to an empty PostgreSQL database or SQLite file, "
        "migrating it first; run again to resume a copy that stopped. Verified by row counts "
        "and SHA-256 checksums of every table."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--to",
            required=True,
            metavar="URL",
            help="postgresql://user:password@host/name, or a SQLite file's path (sqlite:///path)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = database_copy(to=options["to"], progress=options["verbosity"] >= 1)
        except CopyError as exc:
            raise CommandError(str(exc)) from exc
        for table in report.tables:
            if table.rows:
                resumed = f" ({table.copied} by this run)" if table.copied != table.rows else ""
                self.stdout.write(f"  {table.name}: {table.rows} rows{resumed}")
        self.stdout.write(
            f"Copied {report.copied} rows in {report.seconds:.1f} s; verified: the row counts "
            f"and SHA-256 of all {len(report.tables)} tables match."
        )
        if report.unfinished_tasks:
            self.stderr.write(
                f"{report.unfinished_tasks} unfinished tasks of the source's queue were not "
                "copied: run `manage.py embed_pending` on the target if rows wait for vectors."
            )
