"""`manage.py ensure_admin`: a first sign-in for the dashboard on a fresh database (make run)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

USERNAME = "admin"
# What `make run` serves by default; it passes `--url` built from its BIND.
DEFAULT_URL = "http://127.0.0.1:8000/"


class Command(BaseCommand):
    help = "Create the superuser 'admin' with a generated password unless a superuser exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            default=DEFAULT_URL,
            help=f"the address the dashboard is served at, for the sign-in hint ({DEFAULT_URL})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        url = options["url"]
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                f"Sign in at {url} with your superuser; forgot the password? "
                f".venv/bin/python manage.py changepassword {USERNAME}"
            )
            return
        # Printed this once only: nothing stores it in clear.
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(USERNAME, password=password)
        self.stdout.write(f"Sign in at {url} as {USERNAME} / {password}")
