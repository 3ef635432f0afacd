"""The dashboard's two groups: "orca viewers" read everything the dashboard shows, "orca
curators" also edit, expire, restore and delete long-term memories (memory/views.py).

Permissions are normally created after all migrations (post_migrate); on a fresh database they
do not exist yet, so this creates the ones it needs, as Django would name them.
"""

from django.db import migrations

VIEWERS = "orca viewers"
CURATORS = "orca curators"
# (app label, model, verbose name): what the dashboard shows.
VIEWED = [
    ("memory", "mainmessage", "main message"),
    ("memory", "shorttermmemory", "short term memory"),
    ("memory", "longtermmemory", "long term memory"),
    ("memory", "longtermmemoryhistory", "long term memory history"),
    ("memory", "consolidationrun", "consolidation run"),
    ("subagents", "subagentmessage", "subagent message"),
]
CURATED = [("change", "Can change"), ("delete", "Can delete")]


def _permission(apps, using, app_label, model, action, label, verbose_name):
    content_type, _ = (
        apps.get_model("contenttypes", "ContentType")
        .objects.using(using)
        .get_or_create(app_label=app_label, model=model)
    )
    permission, _ = (
        apps.get_model("auth", "Permission")
        .objects.using(using)
        .get_or_create(
            content_type=content_type,
            codename=f"{action}_{model}",
            defaults={"name": f"{label} {verbose_name}"},
        )
    )
    return permission


def create_groups(apps, schema_editor):
    using = schema_editor.connection.alias
    groups = apps.get_model("auth", "Group").objects.using(using)
    views = [
        _permission(apps, using, app, model, "view", "Can view", name)
        for app, model, name in VIEWED
    ]
    curation = [
        _permission(apps, using, "memory", "longtermmemory", action, label, "long term memory")
        for action, label in CURATED
    ]
    viewers, _ = groups.get_or_create(name=VIEWERS)
    viewers.permissions.add(*views)
    curators, _ = groups.get_or_create(name=CURATORS)
    curators.permissions.add(*views, *curation)


def delete_groups(apps, schema_editor):
    groups = apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias)
    groups.filter(name__in=[VIEWERS, CURATORS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_summary_reply"),
        ("subagents", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, delete_groups)]
