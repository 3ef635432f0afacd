"""The indexes on PostgreSQL: full text search (tsvector, GIN) and pgvector (HNSW).

What SQLite's migrations 0002, 0005 and 0011 build with FTS5 and vec0 (they run on SQLite only,
orca_memory.routers), built here for PostgreSQL (and only there) as today's definition; see
memory/index_postgres.py for how a search reads it. The text analysis the SQLite triggers call
in Python (memory.text: CJK unigrams and bigrams, the date-and-speaker label) is written in SQL
below, to the same rules, so that rows written by any client are indexed alike.

pgvector must be installed in the database: CREATE EXTENSION needs a superuser unless the
extension is trusted there (docs/DEPLOYMENT.md).
"""

from __future__ import annotations

from django.conf import settings
from django.db import migrations

POSTGRESQL = {"vendor": "postgresql"}

# (forward, reverse) per statement. The text analysis as SQL functions (memory.text.CJK_RUN is
# the character class); then per indexed table: its table of tsvectors, GIN and scope indexes,
# the trigger that keeps it in sync, and the indexing of rows already there.
INDEX = [
    # English stemming that keeps stop words, as FTS5's porter tokenizer does: a query of stop
    # words alone ("and") still finds them; other queries drop them (memory.index_schema).
    (
        "CREATE TEXT SEARCH DICTIONARY orca_english_stem (TEMPLATE = snowball, Language = english)",
        "DROP TEXT SEARCH DICTIONARY orca_english_stem",
    ),
    (
        "CREATE TEXT SEARCH CONFIGURATION orca_english (COPY = english)",
        "DROP TEXT SEARCH CONFIGURATION orca_english",
    ),
    (
        "ALTER TEXT SEARCH CONFIGURATION orca_english ALTER MAPPING FOR asciiword, word, hword, hword_part, asciihword, hword_asciipart WITH orca_english_stem",
        migrations.RunSQL.noop,
    ),
    (
        r"""CREATE FUNCTION orca_cjk_terms(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT coalesce(string_agg(term, ' '), '') FROM (
    SELECT r[1] AS run FROM regexp_matches(coalesce(t, ''), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+', 'g') AS r
) AS runs, LATERAL (
    SELECT substr(run, i, 1) FROM generate_series(1, length(run)) AS i
    UNION ALL
    SELECT substr(run, i, 2) FROM generate_series(1, length(run) - 1) AS i
) AS terms(term)
$$""",
        "DROP FUNCTION orca_cjk_terms(text)",
    ),
    (
        r"""CREATE FUNCTION orca_fts_words(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT regexp_replace(coalesce(t, ''), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+', ' ', 'g')
$$""",
        "DROP FUNCTION orca_fts_words(text)",
    ),
    (
        r"""CREATE FUNCTION orca_message_label(ts timestamptz, role text, metadata jsonb) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT coalesce(to_char(ts AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY') || ' ', '') || coalesce(
    nullif(btrim(CASE WHEN jsonb_typeof(metadata -> 'speaker') = 'string' THEN metadata ->> 'speaker' END, E' \t\n\r'), ''),
    nullif(btrim(CASE WHEN jsonb_typeof(metadata -> 'name') = 'string' THEN metadata ->> 'name' END, E' \t\n\r'), ''),
    role
) || ': '
$$""",
        "DROP FUNCTION orca_message_label(timestamptz, text, jsonb)",
    ),
    (
        """CREATE FUNCTION orca_text_doc(body text, content text, context text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT setweight(to_tsvector('orca_english', orca_fts_words(body)), 'A')
    || setweight(to_tsvector('simple', orca_cjk_terms(content)), 'C')
    || setweight(to_tsvector('orca_english', orca_fts_words(context)), 'B')
    || setweight(to_tsvector('simple', orca_cjk_terms(context)), 'D')
$$""",
        "DROP FUNCTION orca_text_doc(text, text, text)",
    ),
    (
        "CREATE TABLE fts_main_messages (rowid bigint PRIMARY KEY, agent_id text NOT NULL, session_id text NOT NULL, doc tsvector NOT NULL)",
        "DROP TABLE fts_main_messages",
    ),
    (
        "CREATE INDEX fts_main_messages_doc ON fts_main_messages USING gin (doc)",
        "DROP INDEX fts_main_messages_doc",
    ),
    (
        "CREATE INDEX fts_main_messages_scope ON fts_main_messages (agent_id, session_id)",
        "DROP INDEX fts_main_messages_scope",
    ),
    (
        r"""CREATE FUNCTION fts_main_messages_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM fts_main_messages WHERE rowid = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO fts_main_messages (rowid, agent_id, session_id, doc) VALUES (NEW.id, NEW.agent_id, NEW.session_id, orca_text_doc(
    orca_message_label(NEW."timestamp", NEW.role, NEW.metadata) || NEW.content,
    NEW.content,
    (SELECT string_agg(orca_message_label(NULL, p.role, p.metadata) || p.content, E'\n')
     FROM (SELECT role, metadata, content FROM main_messages AS p
           WHERE p.agent_id = NEW.agent_id AND p.session_id = NEW.session_id
             AND (p."timestamp", p.id) < (NEW."timestamp", NEW.id)
           ORDER BY p."timestamp" DESC, p.id DESC LIMIT 2) AS p)
));
    END IF;
    RETURN NULL;
END
$$""",
        "DROP FUNCTION fts_main_messages_sync()",
    ),
    (
        "CREATE TRIGGER fts_main_messages_sync AFTER INSERT OR DELETE OR UPDATE OF content, agent_id, session_id ON main_messages FOR EACH ROW EXECUTE FUNCTION fts_main_messages_sync()",
        "DROP TRIGGER fts_main_messages_sync ON main_messages",
    ),
    (
        "UPDATE main_messages SET content = content",
        migrations.RunSQL.noop,
    ),
    (
        "CREATE TABLE fts_short_term_memories (rowid bigint PRIMARY KEY, agent_id text NOT NULL, session_id text NOT NULL, doc tsvector NOT NULL)",
        "DROP TABLE fts_short_term_memories",
    ),
    (
        "CREATE INDEX fts_short_term_memories_doc ON fts_short_term_memories USING gin (doc)",
        "DROP INDEX fts_short_term_memories_doc",
    ),
    (
        "CREATE INDEX fts_short_term_memories_scope ON fts_short_term_memories (agent_id, session_id)",
        "DROP INDEX fts_short_term_memories_scope",
    ),
    (
        """CREATE FUNCTION fts_short_term_memories_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM fts_short_term_memories WHERE rowid = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO fts_short_term_memories (rowid, agent_id, session_id, doc) VALUES (NEW.id, NEW.agent_id, NEW.session_id, orca_text_doc(NEW.content, NEW.content, NULL));
    END IF;
    RETURN NULL;
END
$$""",
        "DROP FUNCTION fts_short_term_memories_sync()",
    ),
    (
        "CREATE TRIGGER fts_short_term_memories_sync AFTER INSERT OR DELETE OR UPDATE OF content, agent_id, session_id ON short_term_memories FOR EACH ROW EXECUTE FUNCTION fts_short_term_memories_sync()",
        "DROP TRIGGER fts_short_term_memories_sync ON short_term_memories",
    ),
    (
        "UPDATE short_term_memories SET content = content",
        migrations.RunSQL.noop,
    ),
    (
        "CREATE TABLE fts_long_term_memories (rowid bigint PRIMARY KEY, agent_id text NOT NULL, doc tsvector NOT NULL)",
        "DROP TABLE fts_long_term_memories",
    ),
    (
        "CREATE INDEX fts_long_term_memories_doc ON fts_long_term_memories USING gin (doc)",
        "DROP INDEX fts_long_term_memories_doc",
    ),
    (
        "CREATE INDEX fts_long_term_memories_scope ON fts_long_term_memories (agent_id)",
        "DROP INDEX fts_long_term_memories_scope",
    ),
    (
        """CREATE FUNCTION fts_long_term_memories_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM fts_long_term_memories WHERE rowid = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO fts_long_term_memories (rowid, agent_id, doc) VALUES (NEW.id, NEW.agent_id, orca_text_doc(NEW.content, NEW.content, NULL));
    END IF;
    RETURN NULL;
END
$$""",
        "DROP FUNCTION fts_long_term_memories_sync()",
    ),
    (
        "CREATE TRIGGER fts_long_term_memories_sync AFTER INSERT OR DELETE OR UPDATE OF content, agent_id ON long_term_memories FOR EACH ROW EXECUTE FUNCTION fts_long_term_memories_sync()",
        "DROP TRIGGER fts_long_term_memories_sync ON long_term_memories",
    ),
    (
        "UPDATE long_term_memories SET content = content",
        migrations.RunSQL.noop,
    ),
]

VECTOR_TABLES = [
    'CREATE TABLE "vec_main_messages" ("msg_id" bigint PRIMARY KEY, agent_id text NOT NULL, "session_id" text, "role" text, "msg_type" text, "created_at" bigint, embedding vector({dimension}) NOT NULL)',
    'CREATE INDEX "vec_main_messages_agent" ON "vec_main_messages" (agent_id)',
    'CREATE INDEX "vec_main_messages_hnsw" ON "vec_main_messages" USING hnsw (embedding vector_cosine_ops)',
    'CREATE TABLE "vec_short_term_memories" ("memory_id" bigint PRIMARY KEY, agent_id text NOT NULL, "session_id" text, embedding vector({dimension}) NOT NULL)',
    'CREATE INDEX "vec_short_term_memories_agent" ON "vec_short_term_memories" (agent_id)',
    'CREATE INDEX "vec_short_term_memories_hnsw" ON "vec_short_term_memories" USING hnsw (embedding vector_cosine_ops)',
    'CREATE TABLE "vec_long_term_memories" ("memory_id" bigint PRIMARY KEY, agent_id text NOT NULL, "memory_type" text, embedding vector({dimension}) NOT NULL)',
    'CREATE INDEX "vec_long_term_memories_agent" ON "vec_long_term_memories" (agent_id)',
    'CREATE INDEX "vec_long_term_memories_hnsw" ON "vec_long_term_memories" USING hnsw (embedding vector_cosine_ops)',
]
VECTOR_TABLE_NAMES = ["vec_main_messages", "vec_short_term_memories", "vec_long_term_memories"]


def create_vector_tables(apps, schema_editor) -> None:
    # The configured provider's dimension, as on SQLite (0002); `reembed` remakes them.
    with schema_editor.connection.cursor() as cursor:
        for statement in VECTOR_TABLES:
            cursor.execute(statement.format(dimension=int(settings.ORCA.embedding_dim)))


def drop_vector_tables(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        for name in VECTOR_TABLE_NAMES:
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("memory", "0012_field_validators")]

    operations = [
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS vector", migrations.RunSQL.noop, hints=POSTGRESQL
        ),
        *(migrations.RunSQL(forward, reverse, hints=POSTGRESQL) for forward, reverse in INDEX),
        migrations.RunPython(create_vector_tables, drop_vector_tables, hints=POSTGRESQL),
    ]
