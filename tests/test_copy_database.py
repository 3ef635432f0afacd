"""Copying a store to another database (issue 17), and migrating a database other than the
default, which the copy does to its target."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connections
from django.db.utils import load_backend

from memory.models import ConsolidationRun

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def second_sqlite(path: Path) -> Iterator[str]:
    """A SQLite file as the connection alias "second" while the block runs."""
    configured = connections.configure_settings({"default": {**settings.SQLITE_DATABASE}})
    backend = load_backend(configured["default"]["ENGINE"])
    connections["second"] = backend.DatabaseWrapper(
        {**configured["default"], "NAME": path}, "second"
    )
    try:
        yield "second"
    finally:
        connections["second"].close()
        del connections["second"]


def test_it_migrates_a_second_database_without_touching_the_default(tmp_path):
    # Migration 0008 marks runs without a reason done; 0010 creates the dashboard's groups.
    run = ConsolidationRun.objects.create(agent_id="a", session_id="s", trigger="turns")
    Group.objects.filter(name="orca viewers").delete()

    with second_sqlite(tmp_path / "second.db") as alias:
        call_command("migrate", database=alias, verbosity=0)
        assert Group.objects.using(alias).filter(name="orca viewers").exists()

    run.refresh_from_db()
    assert (run.status, run.requested_at) != ("done", None)
    assert run.status == "queued"
    assert not Group.objects.filter(name="orca viewers").exists()
