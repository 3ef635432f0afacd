"""`manage.py revoke_api_key PREFIX`: revoke keys by the prefix shown in the admin."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.auth import api_key_revoke
from memory.models import ApiKey


class Command(BaseCommand):
    help = "Revoke the active API key whose prefix (e.g. orca_AbC123) is given."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        keys = list(ApiKey.objects.active().filter(prefix=options["prefix"]))
        if len(keys) != 1:
            raise CommandError(
                f"{len(keys)} active keys have the prefix {options['prefix']!r}; revoke it in the "
                "admin instead"
                if keys
                else f"no active key has the prefix {options['prefix']!r}"
            )
        api_key_revoke(keys[0])
        self.stdout.write(f"Revoked {keys[0]}.")
