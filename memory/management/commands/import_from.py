"""`manage.py import_from FORMAT FILE --agent A`: ChatGPT's or Claude's data export, or a
JSON list of memories (memory/importers.py; docs/ARCHIVE.md says what each reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.importers import FORMATS, import_file
from memory.jsonl_import import failures, report_lines
from memory.validation import InvalidInput, check_identifier


class Command(BaseCommand):
    help = (
        "Import ChatGPT's conversations.json (chatgpt), Claude's conversations.json (claude) "
        "or a JSON list of memories (memories) into an agent. Each conversation becomes a "
        "session; broken entries are reported, the rest imported; running it again imports "
        "nothing twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("format", choices=FORMATS)
        parser.add_argument("file", type=Path)
        parser.add_argument("--agent", required=True, help="the agent_id to import into")
        parser.add_argument("--dry-run", action="store_true", help="report, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = check_identifier("agent_id", options["agent"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from exc
        report = import_file(
            options["file"], kind=options["format"], agent_id=agent, dry_run=options["dry_run"]
        )
        for line in report_lines([report], dry_run=options["dry_run"], unit="entry"):
            self.stdout.write(line)
        failed, failed_files = failures([report])
        if failed or failed_files:
            raise CommandError(
                f"{failed} entry(s) or message(s) could not be imported (listed above)"
                if not failed_files
                else f"{options['file']} could not be imported: {report.failure}"
            )
