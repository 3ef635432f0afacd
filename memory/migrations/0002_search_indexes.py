"""The FTS5 tables with their sync triggers, and the vec0 tables.

The FTS5 statements are plain RunSQL. The vec0 tables need sqlite-vec on the connection and
their dimension from settings (ORCA_EMBEDDING_DIM), so they are created by Python; where
sqlite-vec cannot be loaded they are skipped with a warning and the service runs lexical-only.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import migrations

from memory import index

logger = logging.getLogger(__name__)


def create_vector_tables(apps, schema_editor) -> None:
    connection = schema_editor.connection
    support = connection.vector_search
    if not support.enabled:
        logger.warning("Skipping the vector tables: %s", support.reason)
        return
    index.create_vector_tables(dimension=settings.ORCA.embedding_dim, using=connection.alias)


def drop_vector_tables(apps, schema_editor) -> None:
    if schema_editor.connection.vector_search.enabled:
        index.drop_vector_tables(using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        *(
            migrations.RunSQL(forward, reverse)
            for table in index.LEXICAL_TABLES
            for forward, reverse in index.lexical_table_sql(table)
        ),
        migrations.RunPython(create_vector_tables, drop_vector_tables),
    ]
