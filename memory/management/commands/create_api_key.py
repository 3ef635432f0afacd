"""`manage.py create_api_key --agent NAME`: a new API key, printed once on the last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.auth import api_key_create
from memory.validation import InvalidInput


class Command(BaseCommand):
    help = "Create an API key for an agent. The key is printed once and never stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", required=True, help="the agent_id the key reads and writes")
        parser.add_argument("--name", default="", help="a label to recognise the key by")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            row, key = api_key_create(agent_id=options["agent"], name=options["name"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"API key {row.prefix}… for agent {row.agent_id!r} created. "
            "Store it now: it cannot be shown again."
        )
        self.stdout.write(key)
