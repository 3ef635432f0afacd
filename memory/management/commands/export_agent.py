"""`manage.py export_agent AGENT FILE`: the agent's whole memory as one archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.archive import export_agent
from memory.validation import InvalidInput


class Command(BaseCommand):
    help = (
        "Export one agent's messages, sub-agent transcripts, summaries, memories (with their "
        "history and sources), consolidation runs and vectors as an archive (docs/ARCHIVE.md) "
        "that import_agent reads back, on either engine."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent")
        parser.add_argument("file", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rows = export_agent(options["agent"], options["file"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot write {options['file']}: {exc}") from exc
        self.stdout.write(
            f"Wrote {rows} row(s) of agent {options['agent']!r} to {options['file']}."
        )
