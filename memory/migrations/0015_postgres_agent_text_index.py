"""PostgreSQL: the full text indexes hold the agent too, GIN over (agent_id, doc) with btree_gin.

Every lexical search is one agent's. With GIN over `doc` alone, a query word found the rows of
every agent holding it, and each was read from the heap before the agent filter dropped it:
at 100k messages over 10 agents, about 77 ms per word (docs/BENCHMARKS.md, PostgreSQL). With
the agent as the index's first column, the index scan keeps only that agent's rows.

btree_gin ships with PostgreSQL (contrib) and is a trusted extension: the database's owner
can create it without a superuser (docs/DEPLOYMENT.md).
"""

from __future__ import annotations

from django.db import migrations

POSTGRESQL = {"vendor": "postgresql"}
TEXT_TABLE_NAMES = ["fts_main_messages", "fts_short_term_memories", "fts_long_term_memories"]


class Migration(migrations.Migration):
    dependencies = [("memory", "0014_postgres_vector_storage")]

    operations = [
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS btree_gin",
            migrations.RunSQL.noop,  # other objects of the database may use it
            hints=POSTGRESQL,
        ),
        *(
            migrations.RunSQL(
                f'CREATE INDEX "{name}_agent_doc" ON "{name}" USING gin (agent_id, doc)',
                f'DROP INDEX "{name}_agent_doc"',
                hints=POSTGRESQL,
            )
            for name in TEXT_TABLE_NAMES
        ),
        # The agent's index answers every query the doc-only one did (each names its agent).
        *(
            migrations.RunSQL(
                f'DROP INDEX "{name}_doc"',
                f'CREATE INDEX "{name}_doc" ON "{name}" USING gin (doc)',
                hints=POSTGRESQL,
            )
            for name in TEXT_TABLE_NAMES
        ),
    ]
