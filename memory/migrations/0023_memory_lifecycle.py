"""Memory lifecycle (issue 34): supersession columns (nullable, no defaults, no constraint:
SQLite adds and drops them in place and keeps the lexical index's triggers), the sources of each
memory, and the audit log of forget requests.

Memories a person wrote or reworded get a "written by" source per person from their history
(the rule of 0007's `curated`); those consolidation made before this migration name their
session only (`source_session`).
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

import memory.validation

# The actors of the service itself are models.AUTOMATIC_ACTORS (a test compares them).
BACKFILL = """
INSERT INTO long_term_memory_sources (memory_id, agent_id, written_by, added_at)
SELECT h.memory_id, h.agent_id, h.actor, MIN(h.at)
FROM long_term_memory_history h
JOIN long_term_memories m ON m.id = h.memory_id
WHERE h.actor NOT IN ('consolidation', 'cleanup')
  AND (h.action = 'create' OR (h.action = 'update' AND h.old_content IS NOT NULL))
GROUP BY h.memory_id, h.agent_id, h.actor
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0022_trigger_choices"),
    ]

    operations = [
        migrations.AddField(
            model_name="longtermmemory",
            name="valid_from",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="longtermmemory",
            name="valid_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="longtermmemory",
            name="superseded_by",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                help_text="the newer memory that replaced this one",
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="supersedes",
                to="memory.longtermmemory",
            ),
        ),
        migrations.AddIndex(
            model_name="longtermmemory",
            index=models.Index(
                condition=models.Q(("superseded_by__isnull", False)),
                fields=["superseded_by"],
                name="idx_ltm_superseded_by",
            ),
        ),
        migrations.CreateModel(
            name="MemorySource",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "memory",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="sources",
                        to="memory.longtermmemory",
                    ),
                ),
                (
                    "agent_id",
                    models.TextField(
                        validators=[memory.validation.IdentifierValidator("agent_id")]
                    ),
                ),
                (
                    "message",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="memory_sources",
                        to="memory.mainmessage",
                    ),
                ),
                (
                    "written_by",
                    models.TextField(
                        blank=True,
                        help_text="the person (actor) who wrote or edited the memory",
                        null=True,
                    ),
                ),
                (
                    "added_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "long_term_memory_sources",
                "indexes": [
                    models.Index(fields=["memory"], name="idx_ltm_sources_memory"),
                    models.Index(fields=["agent_id", "message"], name="idx_ltm_sources_message"),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("message__isnull", False), ("written_by__isnull", True)),
                            models.Q(("message__isnull", True), ("written_by__isnull", False)),
                            _connector="OR",
                        ),
                        name="long_term_memory_sources_one_kind",
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("message__isnull", False)),
                        fields=("memory", "message"),
                        name="long_term_memory_sources_message_once",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="ForgetReceipt",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "agent_id",
                    models.TextField(
                        validators=[memory.validation.IdentifierValidator("agent_id")]
                    ),
                ),
                (
                    "scope",
                    models.TextField(
                        choices=[
                            ("session", "a session"),
                            ("agent", "the whole agent"),
                            ("query", "everything matching a query"),
                        ]
                    ),
                ),
                (
                    "session_id",
                    models.TextField(
                        blank=True, help_text="the session forgotten (scope `session`)", null=True
                    ),
                ),
                (
                    "actor",
                    models.TextField(help_text="api, mcp, ui:<user>, admin:<user>, manage.py"),
                ),
                ("at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("counts", models.JSONField(default=dict, help_text="rows deleted, per kind")),
                ("ids", models.JSONField(default=dict, help_text="the ids deleted, per kind")),
            ],
            options={
                "db_table": "forget_receipts",
                "indexes": [
                    models.Index(fields=["agent_id", "-at"], name="idx_forget_receipts_agent")
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("scope__in", ["session", "agent", "query"])),
                        name="forget_receipts_scope_valid",
                    )
                ],
            },
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),  # reversed: the table goes
    ]
