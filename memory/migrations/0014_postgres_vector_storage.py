"""PostgreSQL: vectors kept in their rows (storage MAIN) instead of pgvector's EXTERNAL.

Out of line, in the TOAST table, every vector an exact scan reads costs a TOAST index lookup,
and the planner, costing a heap of a few MB, chose a sequential scan over the HNSW index for
an agent with 100k vectors (docs/BENCHMARKS.md, PostgreSQL). Rows written from now on are
stored inline; those already there stay in the TOAST table until the table is rewritten
(`manage.py reembed` makes the vector tables anew).
"""

from __future__ import annotations

from django.db import migrations

POSTGRESQL = {"vendor": "postgresql"}
VECTOR_TABLE_NAMES = ["vec_main_messages", "vec_short_term_memories", "vec_long_term_memories"]


class Migration(migrations.Migration):
    dependencies = [("memory", "0013_postgres_indexes")]

    operations = [
        migrations.RunSQL(
            f'ALTER TABLE IF EXISTS "{name}" ALTER COLUMN embedding SET STORAGE MAIN',
            f'ALTER TABLE IF EXISTS "{name}" ALTER COLUMN embedding SET STORAGE EXTERNAL',
            hints=POSTGRESQL,
        )
        for name in VECTOR_TABLE_NAMES
    ]
