"""long_term_memories.curated: a person wrote or edited the text, consolidation keeps it.

The column is added with plain ALTER TABLE rather than Django's AddField, which on SQLite
rebuilds the table (copying every memory and dropping its FTS triggers) for a NOT NULL column.
The backfill marks memories that a person created or reworded, as their history tells:
any actor but the service's own (consolidation, cleanup); an update counts when it changed
the text (`old_content` is only recorded then).
"""

from django.db import migrations, models

ADD_COLUMN = 'ALTER TABLE "long_term_memories" ADD COLUMN "curated" bool DEFAULT FALSE NOT NULL'
DROP_COLUMN = 'ALTER TABLE "long_term_memories" DROP COLUMN "curated"'
BACKFILL = """
UPDATE "long_term_memories" SET "curated" = TRUE WHERE "id" IN (
    SELECT "memory_id" FROM "long_term_memory_history"
    WHERE "actor" NOT IN ('consolidation', 'cleanup')
      AND ("action" = 'create' OR ("action" = 'update' AND "old_content" IS NOT NULL))
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_import_fingerprint"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(ADD_COLUMN, DROP_COLUMN)],
            state_operations=[
                migrations.AddField(
                    model_name="longtermmemory",
                    name="curated",
                    field=models.BooleanField(
                        db_default=False,
                        help_text="a person wrote or edited the text; consolidation keeps it",
                    ),
                ),
            ],
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
