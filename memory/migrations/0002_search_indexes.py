"""The FTS5 tables with their sync triggers, and the vec0 tables.

Every statement is literal text, so this migration means the same thing whatever
memory/index.py becomes (issue 16). The FTS5 text is the definition index.py generated when
the SQL was frozen (columns body, cjk, ctx and scopes; porter tokenizer), not the one this
migration first ran (body, cjk and scopes; unicode61): a fresh database is created current, and
0011 rebuilds the FTS tables of databases that ran the older text.

The vec0 tables need sqlite-vec on the connection and their dimension from settings
(ORCA_EMBEDDING_DIM), so they are created by Python; where sqlite-vec cannot be loaded they
are skipped with a warning and the service runs lexical-only.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import migrations

logger = logging.getLogger(__name__)

# FTS5 and vec0: SQLite only (orca_memory.routers; PostgreSQL's indexes are migration 0013).
SQLITE = {"vendor": "sqlite"}
# (forward, reverse) per statement: each FTS5 table, then its insert, delete and update triggers.
LEXICAL = [
    (
        "CREATE VIRTUAL TABLE \"fts_main_messages\" USING fts5(body, cjk, ctx, agent_id, session_id, tokenize='porter unicode61 remove_diacritics 2')",
        'DROP TABLE "fts_main_messages"',
    ),
    (
        'CREATE TRIGGER "fts_main_messages_sync_insert" AFTER INSERT ON "main_messages" BEGIN INSERT INTO "fts_main_messages" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(orca_message_label(new.timestamp, new.role, new.metadata) || new.content), orca_cjk_terms(new.content), orca_fts_terms((SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) FROM (SELECT role, metadata, content FROM main_messages AS p WHERE p.agent_id = new.agent_id AND p.session_id = new.session_id AND (p.timestamp, p.id) < (new.timestamp, new.id) ORDER BY p.timestamp DESC, p.id DESC LIMIT 2) AS p)), \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
        'DROP TRIGGER "fts_main_messages_sync_insert"',
    ),
    (
        'CREATE TRIGGER "fts_main_messages_sync_delete" AFTER DELETE ON "main_messages" BEGIN DELETE FROM "fts_main_messages" WHERE rowid = old.id; END',
        'DROP TRIGGER "fts_main_messages_sync_delete"',
    ),
    (
        'CREATE TRIGGER "fts_main_messages_sync_update" AFTER UPDATE OF "content", "agent_id", "session_id" ON "main_messages" BEGIN DELETE FROM "fts_main_messages" WHERE rowid = old.id; INSERT INTO "fts_main_messages" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(orca_message_label(new.timestamp, new.role, new.metadata) || new.content), orca_cjk_terms(new.content), orca_fts_terms((SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) FROM (SELECT role, metadata, content FROM main_messages AS p WHERE p.agent_id = new.agent_id AND p.session_id = new.session_id AND (p.timestamp, p.id) < (new.timestamp, new.id) ORDER BY p.timestamp DESC, p.id DESC LIMIT 2) AS p)), \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
        'DROP TRIGGER "fts_main_messages_sync_update"',
    ),
    (
        "CREATE VIRTUAL TABLE \"fts_short_term_memories\" USING fts5(body, cjk, ctx, agent_id, session_id, tokenize='porter unicode61 remove_diacritics 2')",
        'DROP TABLE "fts_short_term_memories"',
    ),
    (
        'CREATE TRIGGER "fts_short_term_memories_sync_insert" AFTER INSERT ON "short_term_memories" BEGIN INSERT INTO "fts_short_term_memories" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
        'DROP TRIGGER "fts_short_term_memories_sync_insert"',
    ),
    (
        'CREATE TRIGGER "fts_short_term_memories_sync_delete" AFTER DELETE ON "short_term_memories" BEGIN DELETE FROM "fts_short_term_memories" WHERE rowid = old.id; END',
        'DROP TRIGGER "fts_short_term_memories_sync_delete"',
    ),
    (
        'CREATE TRIGGER "fts_short_term_memories_sync_update" AFTER UPDATE OF "content", "agent_id", "session_id" ON "short_term_memories" BEGIN DELETE FROM "fts_short_term_memories" WHERE rowid = old.id; INSERT INTO "fts_short_term_memories" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
        'DROP TRIGGER "fts_short_term_memories_sync_update"',
    ),
    (
        "CREATE VIRTUAL TABLE \"fts_long_term_memories\" USING fts5(body, cjk, ctx, agent_id, tokenize='porter unicode61 remove_diacritics 2')",
        'DROP TABLE "fts_long_term_memories"',
    ),
    (
        'CREATE TRIGGER "fts_long_term_memories_sync_insert" AFTER INSERT ON "long_term_memories" BEGIN INSERT INTO "fts_long_term_memories" (rowid, body, cjk, ctx, agent_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id"))); END',
        'DROP TRIGGER "fts_long_term_memories_sync_insert"',
    ),
    (
        'CREATE TRIGGER "fts_long_term_memories_sync_delete" AFTER DELETE ON "long_term_memories" BEGIN DELETE FROM "fts_long_term_memories" WHERE rowid = old.id; END',
        'DROP TRIGGER "fts_long_term_memories_sync_delete"',
    ),
    (
        'CREATE TRIGGER "fts_long_term_memories_sync_update" AFTER UPDATE OF "content", "agent_id" ON "long_term_memories" BEGIN DELETE FROM "fts_long_term_memories" WHERE rowid = old.id; INSERT INTO "fts_long_term_memories" (rowid, body, cjk, ctx, agent_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id"))); END',
        'DROP TRIGGER "fts_long_term_memories_sync_update"',
    ),
]

# vec0's constructor does not parse quoted identifiers; `{dimension}` is ORCA_EMBEDDING_DIM.
VECTOR_TABLES = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS vec_main_messages USING vec0(msg_id INTEGER PRIMARY KEY, agent_id TEXT PARTITION KEY, session_id text, role text, msg_type text, created_at integer, embedding FLOAT[{dimension}] distance_metric=cosine, chunk_size=128)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS vec_short_term_memories USING vec0(memory_id INTEGER PRIMARY KEY, agent_id TEXT PARTITION KEY, session_id text, embedding FLOAT[{dimension}] distance_metric=cosine, chunk_size=128)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS vec_long_term_memories USING vec0(memory_id INTEGER PRIMARY KEY, agent_id TEXT PARTITION KEY, memory_type text, embedding FLOAT[{dimension}] distance_metric=cosine, chunk_size=128)",
]

VECTOR_TABLE_NAMES = ["vec_main_messages", "vec_short_term_memories", "vec_long_term_memories"]


def create_vector_tables(apps, schema_editor) -> None:
    connection = schema_editor.connection
    support = connection.vector_extension
    if not support.enabled:
        logger.warning("Skipping the vector tables: %s", support.reason)
        return
    dimension = int(settings.ORCA.embedding_dim)
    with connection.cursor() as cursor:
        for statement in VECTOR_TABLES:
            cursor.execute(statement.format(dimension=dimension))


def drop_vector_tables(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if not connection.vector_extension.enabled:
        return
    with connection.cursor() as cursor:
        for name in VECTOR_TABLE_NAMES:
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        *(migrations.RunSQL(forward, reverse, hints=SQLITE) for forward, reverse in LEXICAL),
        migrations.RunPython(create_vector_tables, drop_vector_tables, hints=SQLITE),
    ]
