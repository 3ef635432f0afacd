"""The records of message posts' Idempotency-Keys (memory.idempotency): a retry with the same
key within 24 hours answers the messages stored the first time. Reversible: dropping the table
only makes earlier keys unknown."""

import django.db.models.functions.datetime
from django.db import migrations, models

import memory.validation


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0018_long_term_unembedded_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="IdempotencyKey",
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
                ("key", models.TextField()),
                (
                    "fingerprint",
                    models.TextField(
                        help_text="SHA-256 of the session id and the messages sent: a reuse of the key with another request is refused"
                    ),
                ),
                (
                    "message_ids",
                    models.JSONField(default=list, help_text="the messages stored, in order"),
                ),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "db_table": "idempotency_keys",
                "indexes": [
                    models.Index(fields=["agent_id", "created_at"], name="idx_idempotency_keys_age")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("agent_id", "key"), name="idempotency_keys_unique"
                    )
                ],
            },
        ),
    ]
