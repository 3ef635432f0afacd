"""The `bench` app (benchmarks and evaluations) is in manage.py's commands, never in what
serves: the web application (wsgi.py), the task worker and the MCP server over stdio."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import pytest

import orca_memory.settings
from manage import settings_module
from tests.helpers import ROOT, last_line, manage, service_env


def test_the_task_worker_and_mcp_over_stdio_load_the_services_settings_without_bench():
    for command in ("db_worker", "mcp_stdio"):
        chosen = import_module(settings_module(["manage.py", command, "--agent", "a1"]))
        assert chosen is orca_memory.settings
        assert "bench" not in chosen.INSTALLED_APPS
    # The Procfile's worker is that command.
    assert "python manage.py db_worker;" in (ROOT / "Procfile").read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["manage.py"],
        ["manage.py", "help"],
        ["manage.py", "eval_locomo", "data"],
        ["manage.py", "migrate"],
    ],
)
def test_every_other_command_has_the_services_apps_and_bench(argv):
    installed = import_module(settings_module(argv)).INSTALLED_APPS
    assert installed == [*orca_memory.settings.INSTALLED_APPS, "bench"]


@pytest.mark.slow
def test_the_web_application_neither_installs_nor_imports_bench(tmp_path):
    script = (
        "import sys, orca_memory.wsgi\n"
        "from django.apps import apps\n"
        "print(apps.is_installed('bench'), sorted(m for m in sys.modules if m.split('.')[0] == 'bench'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=service_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert last_line(result) == "False []"


@pytest.mark.slow
def test_manage_py_help_lists_the_bench_commands(tmp_path):
    listed = manage(tmp_path, "help").stdout

    bench = listed.split("[bench]")[1].split("[")[0].split()
    assert bench == [
        "bench_context",
        "bench_embedding",
        "bench_knn",
        "bench_text_index",
        "convert_locomo",
        "eval_extractor",
        "eval_floors",
        "eval_locomo",
        "loadtest",
    ]


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_bench_context_keeps_its_store_and_reuses_it(tmp_path):
    stores = tmp_path / "stores"
    small = ["--sessions", "2", "--messages-per-session", "6", "--memories", "4"]
    run = [*small, "--agents", "1", "--dims", "8", "--queries", "2", "--runs", "1"]
    built = manage(tmp_path, "bench_context", *run, "--store", str(stores))
    assert "sessions" in built.stderr  # filled
    assert [p.name for p in stores.iterdir()] == [
        "context-2x6-4-1a-8d-clustered.db"
    ]  # its shape, vectors included

    reused = manage(tmp_path, "bench_context", *run, "--store", str(stores), "--recall", "3")
    assert "sessions" not in reused.stderr  # not filled again
    assert "| 12 | 4 | 1 | 8 | derived index |" in reused.stdout
    # Too few rows for a graph: the derived index scans exactly, as vec0 does.
    assert "recall@10 against vec0: 1.000 (3 queries, bench-agent-0)" in reused.stderr

    # The text benchmark reads that store: FTS5 and the service's index, the same top 10.
    store = stores / "context-2x6-4-1a-8d-clustered.db"
    text = manage(tmp_path, "bench_text_index", str(store), "--queries", "3").stdout
    assert "index: 12 rows built" in text
    assert "index: p50" in text and "top-10 overlap 1.0000" in text


@pytest.mark.slow
@pytest.mark.postgres
def test_bench_context_keeps_its_postgres_store_as_a_database(tmp_path):
    import psycopg

    from tests.settings_postgres import _server  # started once, by whichever pass imports it

    name = "bench_context_2x6_4_1a_8d_clustered"
    small = ["--sessions", "2", "--messages-per-session", "6", "--memories", "4"]
    run = [*small, "--agents", "1", "--dims", "8", "--queries", "2", "--runs", "1"]
    url = {"ORCA_DATABASE_URL": _server.get_uri("postgres")}
    try:
        built = manage(tmp_path, "bench_context", *run, "--store", str(tmp_path), **url)
        assert "sessions" in built.stderr  # filled
        reused = manage(tmp_path, "bench_context", *run, "--store", str(tmp_path), **url)
        assert "sessions" not in reused.stderr  # not filled again
        assert "| 12 | 4 | 1 | 8 | HNSW |" in reused.stdout
        with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as admin:
            kept = admin.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'bench\\_context\\_%'"
            ).fetchall()
        assert kept == [(name,)]
    finally:
        with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
