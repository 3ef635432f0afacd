"""`manage.py import_agent FILE [--agent NEW_ID]`: an archive of export_agent, back in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.archive import AgentNotEmpty, import_archive
from memory.validation import InvalidInput


class Command(BaseCommand):
    help = (
        "Import an archive written by export_agent (or GET /export), all or nothing, into an "
        "agent that holds no data yet: the archive's own, or --agent. Ids are new ids of this "
        "store; vectors are kept when the embedding signature matches, else re-embedded."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--agent", help="import under this agent id (default: the archive's)")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            with path.open("rb") as f:
                report = import_archive(f, agent_id=options["agent"])
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except (InvalidInput, AgentNotEmpty) as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from exc
        counts = ", ".join(f"{n} {name}" for name, n in report.counts.items())
        self.stdout.write(f"Imported into agent {report.agent_id!r}: {counts}.")
        if report.left_out:
            left = ", ".join(f"{n} {name}" for name, n in report.left_out.items())
            self.stdout.write(f"Left out (their message or memory is not in the archive): {left}.")
        vectors = "kept" if report.vectors_reused else "not kept (another embedding signature)"
        self.stdout.write(
            f"Vectors {vectors}; {report.waiting_for_embedding} row(s) wait for the worker's "
            "embedding."
        )
