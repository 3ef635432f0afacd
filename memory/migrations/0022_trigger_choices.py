"""consolidation_runs.trigger takes its values from models.Trigger: state only, no SQL on
either engine (choices are not in the schema), and reversible."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0021_short_term_summarizer"),
    ]

    operations = [
        migrations.AlterField(
            model_name="consolidationrun",
            name="trigger",
            field=models.TextField(
                choices=[("session_end", "at the session's end"), ("turns", "after 20 turns")]
            ),
        ),
    ]
