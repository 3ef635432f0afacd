# The admin's labels in the page's language: verbose names, choice labels and help texts, no SQL.

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

import memory.validation


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0026_verbose_names"),
        ("subagents", "0002_field_validators"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="subagentmessage",
            options={
                "verbose_name": "sub-agent message",
                "verbose_name_plural": "sub-agent messages",
            },
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="agent_name",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("agent_name")],
                verbose_name="sub-agent",
            ),
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="content",
            field=models.TextField(verbose_name="content"),
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="parent_msg",
            field=models.ForeignKey(
                db_column="parent_msg_id",
                db_index=False,
                on_delete=django.db.models.deletion.DB_CASCADE,
                related_name="subagent_messages",
                to="memory.mainmessage",
                verbose_name="parent message",
            ),
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="role",
            field=models.TextField(
                choices=[("assistant", "Assistant"), ("system", "System")], verbose_name="role"
            ),
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="session_id",
            field=models.TextField(
                validators=[memory.validation.IdentifierValidator("session_id")],
                verbose_name="session",
            ),
        ),
        migrations.AlterField(
            model_name="subagentmessage",
            name="timestamp",
            field=models.DateTimeField(
                db_default=django.db.models.functions.datetime.Now(), verbose_name="time"
            ),
        ),
    ]
