"""`manage.py reembed`: rebuild the vector tables for the configured provider."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from memory import embeddings
from memory.embeddings import EmbeddingError
from memory.vectors import embed_pending, pending_count, rebuild_index


class Command(BaseCommand):
    help = (
        "Drop every vector and embed all messages again with the configured provider "
        "(after changing provider, model or dimension). Messages themselves are untouched."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        embedder = embeddings.configured_embedder()
        if embedder is None:
            raise CommandError("No embedding provider is configured (embedding_provider = none).")
        rebuild_index(embedder.signature)
        pending = pending_count()
        self.stdout.write(f"Vector tables rebuilt for {embedder.signature}; embedding {pending}.")
        try:
            with tqdm(total=pending, unit="msg", disable=not pending) as bar:
                done = embed_pending(embedder=embedder, progress=bar.update)
        except EmbeddingError as exc:
            raise CommandError(
                f"{exc}. The rest stays pending; the worker or `manage.py embed_pending` "
                "finishes it."
            ) from exc
        self.stdout.write(f"Embedded {done} messages.")
