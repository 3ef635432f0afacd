"""Rebuild the three FTS5 tables and their triggers with today's definition, and refill them.

Before issue 16 the migrations built their SQL from memory/index.py, so a database kept the FTS
schema of the version that first migrated it: the first ones have columns body, cjk and scopes
and the plain unicode61 tokenizer, and fail on today's `ctx` queries and six-weight bm25. This
drops whatever FTS tables and triggers a database has and creates today's, whatever version
created it; on a current database it produces the same tables, rows and triggers again.

Only derived data is rebuilt: each FTS table is refilled from its source table with the
functions its triggers call (registered on every connection by orca_memory.core.db), and a
message's `ctx` with the trigger's own subquery over the two messages before it in its
session.

Nothing is reversed: 0002 now creates this same definition, so the database is already what
0010 expects.
"""

from django.db import migrations

# Per table: drop its triggers and the table, create the table, refill it, create its triggers.
# FTS5: SQLite only (orca_memory.routers; PostgreSQL's indexes are migration 0013).
SQLITE = {"vendor": "sqlite"}
MAIN_MESSAGES = [
    'DROP TRIGGER IF EXISTS "fts_main_messages_sync_insert"',
    'DROP TRIGGER IF EXISTS "fts_main_messages_sync_delete"',
    'DROP TRIGGER IF EXISTS "fts_main_messages_sync_update"',
    'DROP TABLE IF EXISTS "fts_main_messages"',
    "CREATE VIRTUAL TABLE \"fts_main_messages\" USING fts5(body, cjk, ctx, agent_id, session_id, tokenize='porter unicode61 remove_diacritics 2')",
    'INSERT INTO "fts_main_messages" (rowid, body, cjk, ctx, agent_id, session_id) SELECT m.id, orca_fts_words(orca_message_label(m.timestamp, m.role, m.metadata) || m.content), orca_cjk_terms(m.content), orca_fts_terms((SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) FROM (SELECT role, metadata, content FROM main_messages AS p WHERE p.agent_id = m.agent_id AND p.session_id = m.session_id AND (p.timestamp, p.id) < (m.timestamp, m.id) ORDER BY p.timestamp DESC, p.id DESC LIMIT 2) AS p)), \'s\' || lower(hex(m."agent_id")), \'s\' || lower(hex(m."session_id")) FROM "main_messages" AS m ORDER BY m.id',
    'CREATE TRIGGER "fts_main_messages_sync_insert" AFTER INSERT ON "main_messages" BEGIN INSERT INTO "fts_main_messages" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(orca_message_label(new.timestamp, new.role, new.metadata) || new.content), orca_cjk_terms(new.content), orca_fts_terms((SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) FROM (SELECT role, metadata, content FROM main_messages AS p WHERE p.agent_id = new.agent_id AND p.session_id = new.session_id AND (p.timestamp, p.id) < (new.timestamp, new.id) ORDER BY p.timestamp DESC, p.id DESC LIMIT 2) AS p)), \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
    'CREATE TRIGGER "fts_main_messages_sync_delete" AFTER DELETE ON "main_messages" BEGIN DELETE FROM "fts_main_messages" WHERE rowid = old.id; END',
    'CREATE TRIGGER "fts_main_messages_sync_update" AFTER UPDATE OF "content", "agent_id", "session_id" ON "main_messages" BEGIN DELETE FROM "fts_main_messages" WHERE rowid = old.id; INSERT INTO "fts_main_messages" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(orca_message_label(new.timestamp, new.role, new.metadata) || new.content), orca_cjk_terms(new.content), orca_fts_terms((SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) FROM (SELECT role, metadata, content FROM main_messages AS p WHERE p.agent_id = new.agent_id AND p.session_id = new.session_id AND (p.timestamp, p.id) < (new.timestamp, new.id) ORDER BY p.timestamp DESC, p.id DESC LIMIT 2) AS p)), \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
]

SHORT_TERM_MEMORIES = [
    'DROP TRIGGER IF EXISTS "fts_short_term_memories_sync_insert"',
    'DROP TRIGGER IF EXISTS "fts_short_term_memories_sync_delete"',
    'DROP TRIGGER IF EXISTS "fts_short_term_memories_sync_update"',
    'DROP TABLE IF EXISTS "fts_short_term_memories"',
    "CREATE VIRTUAL TABLE \"fts_short_term_memories\" USING fts5(body, cjk, ctx, agent_id, session_id, tokenize='porter unicode61 remove_diacritics 2')",
    'INSERT INTO "fts_short_term_memories" (rowid, body, cjk, ctx, agent_id, session_id) SELECT m.id, orca_fts_words(m.content), orca_cjk_terms(m.content), \'\', \'s\' || lower(hex(m."agent_id")), \'s\' || lower(hex(m."session_id")) FROM "short_term_memories" AS m ORDER BY m.id',
    'CREATE TRIGGER "fts_short_term_memories_sync_insert" AFTER INSERT ON "short_term_memories" BEGIN INSERT INTO "fts_short_term_memories" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
    'CREATE TRIGGER "fts_short_term_memories_sync_delete" AFTER DELETE ON "short_term_memories" BEGIN DELETE FROM "fts_short_term_memories" WHERE rowid = old.id; END',
    'CREATE TRIGGER "fts_short_term_memories_sync_update" AFTER UPDATE OF "content", "agent_id", "session_id" ON "short_term_memories" BEGIN DELETE FROM "fts_short_term_memories" WHERE rowid = old.id; INSERT INTO "fts_short_term_memories" (rowid, body, cjk, ctx, agent_id, session_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id")), \'s\' || lower(hex(new."session_id"))); END',
]

LONG_TERM_MEMORIES = [
    'DROP TRIGGER IF EXISTS "fts_long_term_memories_sync_insert"',
    'DROP TRIGGER IF EXISTS "fts_long_term_memories_sync_delete"',
    'DROP TRIGGER IF EXISTS "fts_long_term_memories_sync_update"',
    'DROP TABLE IF EXISTS "fts_long_term_memories"',
    "CREATE VIRTUAL TABLE \"fts_long_term_memories\" USING fts5(body, cjk, ctx, agent_id, tokenize='porter unicode61 remove_diacritics 2')",
    'INSERT INTO "fts_long_term_memories" (rowid, body, cjk, ctx, agent_id) SELECT m.id, orca_fts_words(m.content), orca_cjk_terms(m.content), \'\', \'s\' || lower(hex(m."agent_id")) FROM "long_term_memories" AS m ORDER BY m.id',
    'CREATE TRIGGER "fts_long_term_memories_sync_insert" AFTER INSERT ON "long_term_memories" BEGIN INSERT INTO "fts_long_term_memories" (rowid, body, cjk, ctx, agent_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id"))); END',
    'CREATE TRIGGER "fts_long_term_memories_sync_delete" AFTER DELETE ON "long_term_memories" BEGIN DELETE FROM "fts_long_term_memories" WHERE rowid = old.id; END',
    'CREATE TRIGGER "fts_long_term_memories_sync_update" AFTER UPDATE OF "content", "agent_id" ON "long_term_memories" BEGIN DELETE FROM "fts_long_term_memories" WHERE rowid = old.id; INSERT INTO "fts_long_term_memories" (rowid, body, cjk, ctx, agent_id) VALUES (new.id, orca_fts_words(new.content), orca_cjk_terms(new.content), \'\', \'s\' || lower(hex(new."agent_id"))); END',
]


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_dashboard_groups"),
    ]

    operations = [
        migrations.RunSQL(statement, migrations.RunSQL.noop, hints=SQLITE)
        for statement in (*MAIN_MESSAGES, *SHORT_TERM_MEMORIES, *LONG_TERM_MEMORIES)
    ]
