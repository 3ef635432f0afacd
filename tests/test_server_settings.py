"""PostgreSQL's shared_buffers and maintenance_work_mem, checked at start (memory.server_settings).

The test server (tests/settings_postgres.py) runs with PostgreSQL's defaults, 128MB and 64MB:
below the service's minimum, as on a server nobody tuned. `manage.py local_postgres` sets them
(tests/test_local_postgres.py: its start prints no warning)."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connection

from memory.server_settings import MB, SERVER_SETTINGS, check_server_settings

GB = 1024 * MB

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's settings")


@on_postgres
@pytest.mark.postgres
@pytest.mark.django_db
def test_it_warns_of_each_setting_below_the_minimum_naming_its_value_and_how_to_set_it():
    warnings = check_server_settings(databases=["default"])

    assert [(w.level, w.id) for w in warnings] == [
        (checks.WARNING, "orca.W001"),
        (checks.WARNING, "orca.W002"),
    ]
    shared, maintenance = warnings
    assert shared.msg == (
        "PostgreSQL's shared_buffers is 128MB; orca-memory recommends at least 512MB."
    )
    assert "ALTER SYSTEM SET shared_buffers = '512MB', then restart PostgreSQL" in shared.hint
    assert maintenance.msg == (
        "PostgreSQL's maintenance_work_mem is 64MB; orca-memory recommends at least 512MB."
    )
    assert (
        "ALTER SYSTEM SET maintenance_work_mem = '512MB', then SELECT pg_reload_conf()"
        in maintenance.hint
    )


@on_postgres
@pytest.mark.postgres
@pytest.mark.django_db
def test_migrate_prints_the_warnings(capsys):
    call_command("migrate", "--no-input", verbosity=0, skip_checks=False)

    said = capsys.readouterr()
    assert "orca.W001" in said.err + said.out
    assert "shared_buffers is 128MB" in said.err + said.out


@pytest.mark.django_db
def test_local_postgres_gives_shared_buffers_a_quarter_of_the_machine_and_at_least_the_minimum():
    shared, maintenance = SERVER_SETTINGS

    assert shared.local_bytes(24 * GB) == 6 * GB
    assert shared.local_bytes(1 * GB) == 512 * MB  # the minimum
    assert shared.local_bytes(10 * GB + 3) == 2560 * MB  # whole MB
    assert maintenance.local_bytes(24 * GB) == 512 * MB


def test_sqlite_has_nothing_to_check():
    if connection.vendor == "postgresql":
        pytest.skip("SQLite's case")

    assert check_server_settings(databases=["default"]) == []
    assert check_server_settings(databases=None) == []
