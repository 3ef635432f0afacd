"""manage.py backup: an online copy while writes go on, that opens and passes integrity_check."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memory.messages import message_add
from orca_memory.core.db.base import Driver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite_only]


def test_it_copies_the_live_database_while_writes_go_on(tmp_path):
    for i in range(200):
        message_add(agent_id="a1", session_id="s1", role="user", content=f"before the backup {i}")
    stop = threading.Event()
    written = []

    def keep_writing() -> None:
        try:
            while not stop.is_set():
                written.append(
                    message_add(agent_id="a1", session_id="s2", role="user", content="during")
                )
        finally:
            connection.close()

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        out = io.StringIO()
        call_command("backup", str(tmp_path / "copy.db"), stdout=out)
    finally:
        stop.set()
        writer.join()

    assert "integrity ok" in out.getvalue()
    assert written  # writes really went on
    copy = Driver.connect(str(tmp_path / "copy.db"))
    assert copy.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    (before,) = copy.execute(
        "SELECT count(*) FROM main_messages WHERE session_id = 's1'"
    ).fetchone()
    assert before == 200
    (during,) = copy.execute(
        "SELECT count(*) FROM main_messages WHERE session_id = 's2'"
    ).fetchone()
    assert during <= len(written)


def test_it_never_overwrites_a_file(tmp_path):
    (tmp_path / "exists.db").write_text("mine")
    with pytest.raises(CommandError, match="nothing is overwritten"):
        call_command("backup", str(tmp_path / "exists.db"), stdout=io.StringIO())
    assert (tmp_path / "exists.db").read_text() == "mine"
