"""`manage.py export_jsonl DIR`: every session as DIR/<agent>/<session>.jsonl (names encoded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.jsonl import export_sessions
from memory.validation import InvalidInput, check_stored_identifier
from orca_memory.core.files import UnsafePath


class Command(BaseCommand):
    help = "Export sessions to JSONL, one file per session (migrate_jsonl imports them back)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)
        parser.add_argument("--agent", help="only this agent's sessions")
        parser.add_argument("--session", help="only this session")

    def handle(self, *args: Any, **options: Any) -> None:
        for option, kind in (("agent", "agent_id"), ("session", "session_id")):
            if options[option] is not None:
                try:
                    check_stored_identifier(kind, options[option])
                except InvalidInput as exc:
                    raise CommandError(str(exc)) from exc
        try:
            files = export_sessions(
                options["dir"], agent_id=options["agent"], session_id=options["session"]
            )
        except (UnsafePath, OSError) as exc:
            raise CommandError(f"cannot export into {options['dir']}: {exc}") from exc
        self.stdout.write(f"Wrote {len(files)} session file(s) under {options['dir']}.")
