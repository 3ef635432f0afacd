"""Without sqlite-vec the service still starts, stores and searches text, and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_vec

from orca_memory.core.db.base import Driver, load_sqlite_vec
from tests.helpers import ROOT, last_line, manage

NO_SQLITE_VEC = ROOT / "tests" / "fixtures" / "no_sqlite_vec"

SCRIPT = """
import json
from django.test import Client
from memory import index
from memory.models import MainMessage
from memory.tokens import estimate_tokens
text = "我的偏好是喝茶 always"
m = MainMessage.objects.create(agent_id="a1", session_id="s1", role="user", content=text,
                               token_count=estimate_tokens(text))
hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query="偏好", k=5)
response = Client(SERVER_NAME="localhost").get("/api/v1/health")
print(json.dumps({"saved": m.pk, "hits": [h.id for h in hits],
                  "status_code": response.status_code, "health": response.json()}))
"""


def run(home: Path, *args: str, without_sqlite_vec: bool) -> str:
    env = {"PYTHONPATH": str(NO_SQLITE_VEC)} if without_sqlite_vec else {}
    result = manage(home, *args, **env)
    return result.stderr if args[0] == "migrate" else last_line(result)


@pytest.mark.slow
def test_it_runs_without_sqlite_vec_and_says_why(tmp_path):
    migrated = run(tmp_path, "migrate", "--no-input", without_sqlite_vec=True)
    reason = "Vector search is disabled: the sqlite-vec package cannot be imported"
    assert migrated.count(reason) == 1  # logged once

    report = json.loads(run(tmp_path, "shell", "-c", SCRIPT, without_sqlite_vec=True))

    assert report["hits"] == [report["saved"]]
    assert report["status_code"] == 200
    health = report["health"]
    assert health["status"] == "degraded"
    assert health["database"]["ok"] is True
    assert health["vector_search"]["enabled"] is False
    assert "sqlite-vec package cannot be imported" in health["vector_search"]["reason"]
    assert health["vector_search"]["knn"] is None  # nothing answers KNN
    assert health["embedding"]["pending"] is None  # no provider here: nothing will embed it

    # sqlite-vec back, but the database was migrated without it: health names what is missing.
    health = json.loads(run(tmp_path, "shell", "-c", SCRIPT, without_sqlite_vec=False))["health"]
    assert health["vector_search"]["enabled"] is False
    assert "vec_main_messages" in health["vector_search"]["reason"]


def test_a_failing_extension_load_is_reported(monkeypatch):
    monkeypatch.setattr(sqlite_vec, "loadable_path", lambda: "/nonexistent/vec0")
    conn = Driver.connect(":memory:")
    support = load_sqlite_vec(conn)
    assert support.enabled is False
    assert "loading the sqlite-vec extension failed" in support.reason
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection still works
