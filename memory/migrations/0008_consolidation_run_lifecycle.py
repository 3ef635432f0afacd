"""consolidation_runs follows a run from its request to its end: a request inside the agent's
30-second window is deferred (run_after), not dropped, and each run records the last message
and summary it covered, so the next one starts after them.

Existing rows: a run that went through is `done`, covering the session's messages and
summaries written before it started; a request dropped by the old window is `skipped`; one
whose extraction failed is `failed`. `skipped_reason` becomes `reason`. Reversing keeps every
row: a run that had not gone through gets its status as its reason, as the old schema read it.
"""

import django.db.models.functions.datetime
from django.db import migrations, models
from django.db.models import F

OLD_WINDOW_REASON = "the agent was consolidated less than 30 seconds ago"
# Approximate, from the times: rows written before the run started.
BACKFILL_COVERED = """
UPDATE "consolidation_runs" SET
    "last_message_id" = (
        SELECT MAX(m."id") FROM "main_messages" AS m
        WHERE m."agent_id" = "consolidation_runs"."agent_id"
          AND m."session_id" = "consolidation_runs"."session_id"
          AND m."timestamp" <= "consolidation_runs"."started_at"
    ),
    "last_summary_id" = (
        SELECT MAX(s."id") FROM "short_term_memories" AS s
        WHERE s."agent_id" = "consolidation_runs"."agent_id"
          AND s."session_id" = "consolidation_runs"."session_id"
          AND s."created_at" <= "consolidation_runs"."started_at"
    )
WHERE "status" = 'done'
"""


def statuses_from_reasons(apps, schema_editor) -> None:
    runs = apps.get_model("memory", "ConsolidationRun").objects.using(
        schema_editor.connection.alias
    )
    runs.update(requested_at=F("started_at"))
    runs.filter(reason="").update(status="done")
    runs.filter(reason=OLD_WINDOW_REASON).update(status="skipped")
    runs.exclude(status__in=["done", "skipped"]).update(status="failed")


def reasons_from_statuses(apps, schema_editor) -> None:
    runs = apps.get_model("memory", "ConsolidationRun").objects.using(
        schema_editor.connection.alias
    )
    runs.filter(started_at__isnull=True).update(started_at=F("requested_at"))
    # The old schema reads an empty reason as "it ran".
    for status in ("queued", "deferred", "running", "failed", "skipped"):
        runs.filter(status=status, reason="").update(reason=status)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_longtermmemory_curated"),
    ]

    operations = [
        migrations.RenameField(
            model_name="consolidationrun", old_name="skipped_reason", new_name="reason"
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="reason",
            field=models.TextField(blank=True, db_default="", help_text="why it waited or failed"),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="status",
            field=models.TextField(
                choices=[
                    ("queued", "Queued"),
                    ("deferred", "Deferred"),
                    ("running", "Running"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("skipped", "Skipped"),
                ],
                db_default="queued",
            ),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="requested_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="run_after",
            field=models.DateTimeField(
                blank=True, help_text="a deferred run waits for the agent's 30 s window", null=True
            ),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="finished_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="last_message_id",
            field=models.BigIntegerField(
                blank=True, help_text="the session's last message this run covers", null=True
            ),
        ),
        migrations.AddField(
            model_name="consolidationrun",
            name="last_summary_id",
            field=models.BigIntegerField(
                blank=True, help_text="the session's last summary this run covers", null=True
            ),
        ),
        migrations.AlterField(
            model_name="consolidationrun",
            name="started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(statuses_from_reasons, reasons_from_statuses),
        migrations.RunSQL(BACKFILL_COVERED, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="consolidationrun",
            index=models.Index(fields=["agent_id", "session_id"], name="idx_consolidation_session"),
        ),
        migrations.AddConstraint(
            model_name="consolidationrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("status__in", ["queued", "deferred", "running", "done", "failed", "skipped"])
                ),
                name="consolidation_runs_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="consolidationrun",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ("queued", "deferred"))),
                fields=("agent_id", "session_id"),
                name="consolidation_runs_one_waiting_per_session",
            ),
        ),
    ]
