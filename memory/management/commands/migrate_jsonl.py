"""`manage.py migrate_jsonl PATH...`: import the old JSONL session files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.jsonl_import import FileReport, failures, import_file, jsonl_files, report_lines
from memory.models import DEFAULT_AGENT
from memory.validation import InvalidInput, check_identifier


class Command(BaseCommand):
    help = (
        "Import JSONL session files (or folders of *.jsonl). Running it again imports "
        "nothing twice; bad lines are reported with file and line, never abort the run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--agent", default=DEFAULT_AGENT, help="the agent_id to import as")
        parser.add_argument("--dry-run", action="store_true", help="report, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = check_identifier("agent_id", options["agent"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from exc
        missing = [str(p) for p in options["paths"] if not p.exists()]
        if missing:
            raise CommandError(f"not found: {', '.join(missing)}")
        files = list(jsonl_files(options["paths"]))
        reports = []
        known: set[str] = set()  # fingerprints imported in this run, across its files
        for path in tqdm(files, unit="file", disable=len(files) < 5, file=self.stderr._out):
            reports.append(
                import_file(path, agent_id=agent, dry_run=options["dry_run"], known=known)
            )
        self._summary(reports, dry_run=options["dry_run"])

    def _summary(self, reports: list[FileReport], *, dry_run: bool) -> None:
        for line in report_lines(reports, dry_run=dry_run):
            self.stdout.write(line)
        failed, failed_files = failures(reports)
        if failed or failed_files:
            raise CommandError(
                f"{failed} line(s) and {failed_files} file(s) could not be imported (listed above)"
            )
