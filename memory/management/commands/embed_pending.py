"""`manage.py embed_pending`: embed the waiting messages now, or queue the worker to."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.embeddings import EmbeddingError
from memory.scheduling import schedule_embedding
from memory.vectors import SignatureMismatch, embed_pending, pending_count


class Command(BaseCommand):
    help = "Embed every message still waiting for its vector (or --enqueue it for the worker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--enqueue",
            action="store_true",
            help="only queue a background run (the worker does this at start-up)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["enqueue"]:
            schedule_embedding()
            return
        pending = pending_count()
        try:
            with tqdm(total=pending, unit="msg", disable=not pending) as bar:
                done = embed_pending(progress=bar.update)
        except (EmbeddingError, SignatureMismatch) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Embedded {done} of {pending} pending messages.")
