"""`manage.py ensure_admin`: a first sign-in for the dashboard on a fresh database (make run)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

USERNAME = "admin"
SIGN_IN_URL = "http://127.0.0.1:8000/"


class Command(BaseCommand):
    help = "Create the superuser 'admin' with a generated password unless a superuser exists."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                f"Sign in at {SIGN_IN_URL} with your superuser; forgot the password? "
                f".venv/bin/python manage.py changepassword {USERNAME}"
            )
            return
        # Printed this once only: nothing stores it in clear.
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(USERNAME, password=password)
        self.stdout.write(f"Sign in at {SIGN_IN_URL} as {USERNAME} / {password}")
