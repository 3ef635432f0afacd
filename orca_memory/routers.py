"""Engine-specific migration operations.

The lexical and vector indexes are raw SQL that differs per engine (FTS5 and vec0 on SQLite;
tsvector, GIN and pgvector on PostgreSQL). A migration writes each engine's SQL literally and
marks the operation `hints={"vendor": "sqlite"}` or `{"vendor": "postgresql"}`; this router
lets it run on that engine only. Operations without the hint run everywhere.
"""

from __future__ import annotations

from typing import Any

from django.db import connections


class EngineRouter:
    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        vendor = hints.get("vendor")
        return None if vendor is None else connections[db].vendor == vendor
