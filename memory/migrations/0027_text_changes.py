"""The change log of the messages' text (SQLite only): which messages' FTS5 rows were written
or deleted, so that every process's derived text index (memory.index_text) catches up with
writes made by the others. Written by triggers on main_messages in the writer's transaction,
pruned by them to the newest 100,000 entries. A derived record: dropping it loses no data.

The statements are memory.index_text.change_log_sql()'s, frozen (tests/test_migrations.py).
"""

from __future__ import annotations

from django.db import migrations

SQLITE = {"vendor": "sqlite"}

CHANGES = [
    (
        'CREATE TABLE "text_changes" (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, agent_id text NOT NULL, row_id integer NOT NULL)',
        'DROP TABLE "text_changes"',
    ),
    (
        'CREATE TRIGGER "text_changes_insert" AFTER INSERT ON "main_messages" BEGIN INSERT INTO "text_changes" (agent_id, row_id) VALUES (new.agent_id, new.id); DELETE FROM "text_changes" WHERE id <= (SELECT max(id) FROM "text_changes") - 100000; END',
        'DROP TRIGGER "text_changes_insert"',
    ),
    (
        'CREATE TRIGGER "text_changes_delete" AFTER DELETE ON "main_messages" BEGIN INSERT INTO "text_changes" (agent_id, row_id) VALUES (old.agent_id, old.id); DELETE FROM "text_changes" WHERE id <= (SELECT max(id) FROM "text_changes") - 100000; END',
        'DROP TRIGGER "text_changes_delete"',
    ),
    (
        'CREATE TRIGGER "text_changes_update" AFTER UPDATE OF "content", "agent_id", "session_id" ON "main_messages" BEGIN INSERT INTO "text_changes" (agent_id, row_id) VALUES (old.agent_id, old.id); INSERT INTO "text_changes" (agent_id, row_id) SELECT new.agent_id, new.id WHERE new.agent_id IS NOT old.agent_id; DELETE FROM "text_changes" WHERE id <= (SELECT max(id) FROM "text_changes") - 100000; END',
        'DROP TRIGGER "text_changes_update"',
    ),
]


class Migration(migrations.Migration):
    dependencies = [("memory", "0026_verbose_names")]

    operations = [migrations.RunSQL(forward, reverse, hints=SQLITE) for forward, reverse in CHANGES]
