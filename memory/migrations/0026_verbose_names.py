# The admin's labels in the page's language: verbose names, choice labels and help texts, no SQL.

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

import memory.validation


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0025_memory_attribute"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="apikey",
            options={"verbose_name": "API key", "verbose_name_plural": "API keys"},
        ),
        migrations.AlterModelOptions(
            name="consolidationrun",
            options={
                "verbose_name": "consolidation run",
                "verbose_name_plural": "consolidation runs",
            },
        ),
        migrations.AlterModelOptions(
            name="longtermmemory",
            options={
                "verbose_name": "long-term memory",
                "verbose_name_plural": "long-term memories",
            },
        ),
        migrations.AlterModelOptions(
            name="longtermmemoryhistory",
            options={
                "verbose_name": "long-term memory change",
                "verbose_name_plural": "long-term memory history",
            },
        ),
        migrations.AlterModelOptions(
            name="mainmessage",
            options={"verbose_name": "message", "verbose_name_plural": "messages"},
        ),
        migrations.AlterModelOptions(
            name="shorttermmemory",
            options={
                "verbose_name": "short-term memory",
                "verbose_name_plural": "short-term memories",
            },
        ),
        migrations.AlterField(
            model_name="apikey",
            name="agent_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("agent_id")], verbose_name="agent"
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="created_at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="created"
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="key_hash",
            field=models.TextField(unique=True, verbose_name="key hash"),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="last_used_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="last used"),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="name",
            field=models.TextField(blank=True, db_default="", verbose_name="name"),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="prefix",
            field=models.TextField(
                help_text="The key's first characters, to tell keys apart.", verbose_name="prefix"
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="revoked_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="revoked"),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="agent_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("agent_id")], verbose_name="agent"
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="created",
            field=models.IntegerField(db_default=0, verbose_name="memories created"),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="extractor",
            field=models.TextField(
                blank=True,
                choices=[("llm", "the chat model"), ("rules", "the rules")],
                db_default="",
                verbose_name="extractor",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="finished_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="finished"),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="last_message_id",
            field=models.BigIntegerField(
                blank=True,
                help_text="the session's last message this run covers",
                null=True,
                verbose_name="last message",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="last_summary_id",
            field=models.BigIntegerField(
                blank=True,
                help_text="the session's last summary this run covers",
                null=True,
                verbose_name="last summary",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="merged",
            field=models.IntegerField(db_default=0, verbose_name="memories merged"),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="reason",
            field=models.TextField(
                blank=True,
                db_default="",
                help_text="why it waited or failed",
                verbose_name="reason",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="requested_at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="requested"
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="run_after",
            field=models.DateTimeField(
                blank=True,
                help_text="a deferred run waits for the agent's 30 s window",
                null=True,
                verbose_name="runs after",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="session_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("session_id")],
                verbose_name="session",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="started_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="started"),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="status",
            field=models.TextField(
                choices=[
                    ("queued", "queued"),
                    ("deferred", "deferred"),
                    ("running", "running"),
                    ("done", "done"),
                    ("failed", "failed"),
                    ("skipped", "skipped"),
                ],
                db_default="queued",
                verbose_name="status",
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="trigger",
            field=models.TextField(
                choices=[("session_end", "at the session's end"), ("turns", "after 20 turns")],
                verbose_name="trigger",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="access_count",
            field=models.IntegerField(db_default=0, verbose_name="uses"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="agent_id",
            field=models.TextField(
                db_default="default",
                validators=[memory.validation.IdentifierValidator("agent_id")],
                verbose_name="agent",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="archived"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="attribute",
            field=models.TextField(blank=True, editable=False, null=True, verbose_name="attribute"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="confidence",
            field=models.FloatField(
                db_default=0.5,
                validators=[memory.validation.validate_confidence],
                verbose_name="confidence",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="content",
            field=models.TextField(verbose_name="content"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="created_at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="created"
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="curated",
            field=models.BooleanField(
                db_default=False,
                help_text="a person wrote or edited the text; consolidation keeps it",
                verbose_name="curated",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="expires"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="has_embedding",
            field=models.BooleanField(db_default=False, verbose_name="embedded"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="last_accessed",
            field=models.DateTimeField(blank=True, null=True, verbose_name="last used"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="memory_type",
            field=models.TextField(
                choices=[
                    ("preference", "Preference"),
                    ("fact", "Fact"),
                    ("decision", "Decision"),
                    ("project", "Project"),
                ],
                verbose_name="memory type",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="source_count",
            field=models.IntegerField(db_default=1, verbose_name="sources"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="source_session",
            field=models.TextField(
                blank=True,
                null=True,
                validators=[memory.validation.IdentifierValidator("source_session")],
                verbose_name="source session",
            ),
        ),
        migrations.AlterField(
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
                verbose_name="superseded by",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="updated_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="updated"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="valid_from",
            field=models.DateTimeField(blank=True, null=True, verbose_name="valid from"),
        ),
        migrations.AlterField(
            model_name="longtermmemory",
            name="valid_until",
            field=models.DateTimeField(blank=True, null=True, verbose_name="valid until"),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="action",
            field=models.TextField(
                choices=[
                    ("create", "created"),
                    ("update", "edited"),
                    ("merge", "confirmed by an extraction"),
                    ("expire", "expired"),
                    ("archive", "archived"),
                    ("delete", "deleted"),
                    ("restore", "restored"),
                    ("revert", "reverted"),
                    ("supersede", "superseded"),
                    ("unsupersede", "supersession undone"),
                ],
                verbose_name="action",
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="actor",
            field=models.TextField(
                help_text="api, admin:<user>, consolidation, cleanup...", verbose_name="by"
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="agent_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("agent_id")], verbose_name="agent"
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="time"
            ),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="changes",
            field=models.JSONField(blank=True, null=True, verbose_name="changes"),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="memory_id",
            field=models.BigIntegerField(verbose_name="memory"),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="new_content",
            field=models.TextField(blank=True, null=True, verbose_name="text after"),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="old_content",
            field=models.TextField(blank=True, null=True, verbose_name="text before"),
        ),
        migrations.AlterField(
            model_name="longtermmemoryhistory",
            name="old_values",
            field=models.JSONField(blank=True, null=True, verbose_name="values before"),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="agent_id",
            field=models.TextField(
                db_default="default",
                validators=[memory.validation.IdentifierValidator("agent_id")],
                verbose_name="agent",
            ),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="content",
            field=models.TextField(verbose_name="content"),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="has_embedding",
            field=models.BooleanField(db_default=False, verbose_name="embedded"),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="metadata",
            field=models.JSONField(blank=True, null=True, verbose_name="metadata"),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="msg_type",
            field=models.TextField(
                choices=[
                    ("normal", "Normal"),
                    ("fact", "Fact"),
                    ("todo", "Todo"),
                    ("decision", "Decision"),
                    ("preference", "Preference"),
                    ("error", "Error"),
                ],
                db_default="normal",
                verbose_name="message type",
            ),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="role",
            field=models.TextField(
                choices=[
                    ("user", "User"),
                    ("assistant", "Assistant"),
                    ("system", "System"),
                    ("tool", "Tool"),
                ],
                verbose_name="role",
            ),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="session_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("session_id")],
                verbose_name="session",
            ),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="timestamp",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="time"
            ),
        ),
        migrations.AlterField(
            model_name="mainmessage",
            name="token_count",
            field=models.IntegerField(db_default=0, verbose_name="tokens"),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="agent_id",
            field=models.TextField(
                db_default="default",
                validators=[memory.validation.IdentifierValidator("agent_id")],
                verbose_name="agent",
            ),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="confidence",
            field=models.FloatField(
                db_default=0.8,
                validators=[memory.validation.validate_confidence],
                verbose_name="confidence",
            ),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="content",
            field=models.TextField(verbose_name="content"),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="created_at",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="created"
            ),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="has_embedding",
            field=models.BooleanField(db_default=False, verbose_name="embedded"),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="reply_id",
            field=models.BigIntegerField(blank=True, null=True, verbose_name="reply"),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="session_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("session_id")],
                verbose_name="session",
            ),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="source_count",
            field=models.IntegerField(db_default=1, verbose_name="sources"),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="summarizer",
            field=models.TextField(
                blank=True,
                choices=[("llm", "Llm"), ("offline", "Offline")],
                null=True,
                verbose_name="summarizer",
            ),
        ),
        migrations.AlterField(
            model_name="shorttermmemory",
            name="updated_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="updated"),
        ),
    ]
