"""Files the service creates are 0600 in 0700 folders, whichever command creates them first,
whatever the umask; a database an earlier version left readable is made private."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from orca_memory.core.files import id_file_name, make_private, private_dir, shared_secret
from tests import helpers
from tests.helpers import last_line


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def manage(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """manage.py under umask 0: any mode not given explicitly would come out 0777 or 0666."""
    return helpers.manage(home, *args, check=False, umask=0, **env)


# Posts a message through the API and, while the connection is open, prints the modes of the
# database's WAL and SHM files.
POST_AND_SHOW_WAL = """
import json, os, stat
from django.conf import settings
from django.test import Client
r = Client(SERVER_NAME="localhost").post(
    "/api/v1/sessions/s:1/messages", data={"role": "user", "content": "hello"},
    content_type="application/json", headers={"Authorization": "Bearer KEY"})
db = str(settings.ORCA.db_path)
print(json.dumps([r.status_code] + [stat.S_IMODE(os.stat(db + s).st_mode) for s in ("-wal", "-shm")]))
"""


@pytest.mark.slow
def test_every_file_the_service_creates_is_private_whatever_the_umask(tmp_path):
    home = tmp_path / "home"  # does not exist yet: the first command creates it
    data = home / "data"
    assert manage(home, "migrate", "--no-input").returncode == 0
    assert {p: mode(p) for p in (home, data)} == {home: 0o700, data: 0o700}
    assert {p.name: mode(p) for p in data.iterdir()} == {"orca.db": 0o600, "secret_key": 0o600}

    key = last_line(manage(home, "create_api_key", "--agent", "a1"))
    assert mode(data / "api_keys.json") == 0o600

    post = manage(home, "shell", "-c", POST_AND_SHOW_WAL.replace("KEY", key), ORCA_JSONL_BACKUP="1")
    assert json.loads(last_line(post)) == [201, 0o600, 0o600], post.stderr
    backup_file = data / "jsonl" / "a1" / id_file_name("s:1", ".jsonl")
    assert [mode(p) for p in (data / "jsonl", backup_file.parent, backup_file)] == [
        0o700,
        0o700,
        0o600,
    ]

    copy = tmp_path / "backups" / "today" / "orca.db"
    assert manage(home, "backup", str(copy)).returncode == 0
    assert [mode(p) for p in (copy.parent.parent, copy.parent, copy)] == [0o700, 0o700, 0o600]

    out = tmp_path / "exports" / "now"
    assert manage(home, "export_jsonl", str(out)).returncode == 0
    exported = out / "a1" / id_file_name("s:1", ".jsonl")
    assert [mode(p) for p in (out.parent, out, exported.parent, exported)] == [
        0o700,
        0o700,
        0o700,
        0o600,
    ]


@pytest.mark.slow
def test_an_import_run_first_creates_a_private_database(tmp_path):
    home = tmp_path / "home"
    lines = tmp_path / "s.jsonl"
    lines.write_text('{"role": "user", "content": "x"}\n')

    result = manage(home, "migrate_jsonl", str(lines))

    # Not migrated yet: the file is reported, not a traceback.
    assert result.returncode != 0 and f"{lines}: the database failed" in result.stdout
    assert (mode(home), mode(home / "data"), mode(home / "data" / "orca.db")) == (
        0o700,
        0o700,
        0o600,
    )


@pytest.mark.slow
def test_a_database_an_earlier_version_left_readable_is_made_private(tmp_path):
    data = tmp_path / "home" / "data"
    data.mkdir(parents=True, mode=0o755)
    data.chmod(0o755)
    sqlite3.connect(data / "orca.db").close()
    (data / "orca.db").chmod(0o644)

    result = manage(tmp_path / "home", "migrate", "--no-input")

    assert result.returncode == 0, result.stderr
    assert (mode(data), mode(data / "orca.db")) == (0o700, 0o600)
    assert "made" in result.stderr and "private" in result.stderr


@pytest.mark.parametrize("umask", [0, 0o022, 0o077])
def test_private_dir_makes_every_missing_folder_0700(tmp_path, umask):
    previous = os.umask(umask)
    try:
        private_dir(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(previous)
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3


def test_make_private_leaves_private_files_alone(tmp_path):
    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o600)
    assert not make_private(path)
    path.chmod(0o640)
    assert make_private(path) and mode(path) == 0o600


def test_the_secret_key_is_made_once_and_private(tmp_path):
    path = tmp_path / "secret_key"
    key = shared_secret(path)
    assert len(key) > 50
    assert shared_secret(path) == key
    assert mode(path) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


def test_a_secret_key_another_process_made_meanwhile_is_the_one_used(tmp_path, monkeypatch):
    # `make run` starts the web server and the worker together on a fresh data folder: this
    # process looked before the other one made the key, and must not fail or replace it.
    path = tmp_path / "secret_key"
    path.write_text("the other process's key\n")
    exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self, **kw: self != path and exists(self, **kw))

    assert shared_secret(path) == "the other process's key"
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]
