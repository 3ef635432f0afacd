"""`manage.py export_jsonl DIR`: every session as DIR/<agent>/<session>.jsonl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.jsonl import export_sessions


class Command(BaseCommand):
    help = "Export sessions to JSONL, one file per session (migrate_jsonl imports them back)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", type=Path)
        parser.add_argument("--agent", help="only this agent's sessions")
        parser.add_argument("--session", help="only this session")

    def handle(self, *args: Any, **options: Any) -> None:
        files = export_sessions(
            options["dir"], agent_id=options["agent"], session_id=options["session"]
        )
        self.stdout.write(f"Wrote {len(files)} session file(s) under {options['dir']}.")
