"""The change log of the vector tables (SQLite only): which rows' vectors were written or
deleted, so that every process's derived in-memory index (memory.index_numpy) catches up
with writes made by the others. A derived record: dropping it loses no data."""

from __future__ import annotations

from django.db import migrations

SQLITE = {"vendor": "sqlite"}

CHANGES = [
    (
        'CREATE TABLE "vector_changes" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
        '"table_name" text NOT NULL, "agent_id" text NOT NULL, "row_id" integer NULL)',
        'DROP TABLE "vector_changes"',
    ),
    (
        'CREATE INDEX "vector_changes_scope" ON "vector_changes" ("table_name", "agent_id", "id")',
        'DROP INDEX "vector_changes_scope"',
    ),
]


class Migration(migrations.Migration):
    dependencies = [("memory", "0016_history_old_values")]

    operations = [migrations.RunSQL(forward, reverse, hints=SQLITE) for forward, reverse in CHANGES]
