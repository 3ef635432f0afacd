"""migrate_jsonl / export_jsonl / the JSONL backup: shapes, idempotence, bad input, round trip."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory import jsonl, jsonl_import
from memory.messages import message_add
from memory.models import MainMessage
from orca_memory.core.files import UnsafePath
from tests.helpers import ROOT, last_line, manage, service_env

pytestmark = pytest.mark.django_db


def write(path: Path, *lines: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        for line in lines:
            f.write(
                line if isinstance(line, bytes) else json.dumps(line, ensure_ascii=False).encode()
            )
            f.write(b"\n")
    return path


def migrate(*args: str) -> str:
    out = io.StringIO()
    call_command("migrate_jsonl", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def rows(**filters) -> list[tuple]:
    return list(
        MainMessage.objects.filter(**filters)
        .order_by("id")
        .values_list(
            "agent_id", "session_id", "role", "content", "msg_type", "metadata", "token_count"
        )
    )


def test_it_reads_each_line_shape(tmp_path):
    path = write(
        tmp_path / "chat-1.jsonl",
        {
            "role": "user",
            "content": "我喜欢绿茶",
            "timestamp": "2026-05-10T09:00:00+08:00",
            "type": "preference",
            "metadata": {"lang": "zh"},
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at this"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "weather", "content": "sunny"},
        {
            "type": "message",
            "timestamp": 1778374800,
            "message": {"role": "assistant", "content": "It is sunny."},
        },
        {"role": "user", "content": "elsewhere", "session_id": "chat-2"},
    )

    assert "imported 6" in migrate(str(path), "--agent", "a1")

    got = rows(agent_id="a1")
    assert [r[1:5] for r in got] == [
        ("chat-1", "user", "我喜欢绿茶", "preference"),
        ("chat-1", "user", "look at this\n[image_url]", "normal"),
        ("chat-1", "assistant", "[tool call] weather({})", "normal"),
        ("chat-1", "tool", "sunny", "normal"),
        ("chat-1", "assistant", "It is sunny.", "normal"),
        ("chat-2", "user", "elsewhere", "normal"),
    ]
    assert got[0][5] == {"lang": "zh"} and got[0][6] == 8
    assert got[1][5] == {"content_parts": ["image_url"]}
    assert got[2][5]["tool_calls"][0]["function"]["name"] == "weather"
    assert got[3][5] == {"tool_call_id": "c1", "name": "weather"}
    first = MainMessage.objects.get(content="我喜欢绿茶")
    assert first.timestamp == datetime(2026, 5, 10, 1, 0, tzinfo=UTC)
    assert MainMessage.objects.get(content="sunny").timestamp == first.timestamp  # inherited


def test_importing_twice_adds_nothing_and_identical_lines_stay_two_messages(tmp_path):
    path = write(
        tmp_path / "s.jsonl",
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "fine"},
    )
    migrate(str(path))
    assert "imported 0, skipped 3" in migrate(str(path))
    assert MainMessage.objects.count() == 3
    write(
        tmp_path / "s.jsonl",
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "fine"},
        {"role": "user", "content": "ok"},
    )
    assert "imported 1, skipped 3" in migrate(str(path))


@pytest.mark.django_db(transaction=True)
def test_a_crash_in_the_middle_is_completed_by_running_again(tmp_path, monkeypatch):
    write(tmp_path / "a.jsonl", *({"role": "user", "content": f"a{i}"} for i in range(3)))
    write(tmp_path / "b.jsonl", *({"role": "user", "content": f"b{i}"} for i in range(3)))
    real = jsonl_import.messages.message_add
    calls = []

    def crash_on_fifth(**kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt("killed")
        return real(**kwargs)

    monkeypatch.setattr(jsonl_import.messages, "message_add", crash_on_fifth)
    with pytest.raises(KeyboardInterrupt):
        migrate(str(tmp_path))
    assert sorted(c for (*_, c, _, _, _) in rows()) == [
        "a0",
        "a1",
        "a2",
    ]  # b.jsonl rolled back whole

    monkeypatch.setattr(jsonl_import.messages, "message_add", real)
    output = migrate(str(tmp_path))
    assert "a.jsonl: imported 0, skipped 3" in output and "b.jsonl: imported 3" in output
    assert MainMessage.objects.count() == 6


def test_bad_lines_are_reported_with_file_and_line_and_the_rest_imports(tmp_path):
    path = write(
        tmp_path / "bad.jsonl",
        {"role": "user", "content": "fine line"},
        b"{not json",
        b"[1, 2]",
        {"role": "user", "content": 42},
        {"role": "user", "content": "x", "metadata": [1]},
        {"role": "user", "content": "   "},
        b'{"role": "user", "content": "caf\xe9"}',
        {"role": "function", "content": "x"},
        {"role": "user", "content": "x", "type": "gossip"},
        {"role": "user", "content": "x", "timestamp": "yesterday"},
        {"role": "user", "content": "x", "session_id": "a/b"},
        {"role": "user", "content": "also fine"},
    )

    with pytest.raises(CommandError, match="10 line"):
        out = io.StringIO()
        call_command("migrate_jsonl", str(path), stdout=out, stderr=io.StringIO())
    report = out.getvalue()

    for number, reason in [
        (2, "malformed JSON"),
        (3, "a line must be a JSON object"),
        (4, "content must be text, got int"),
        (5, "metadata must be a JSON object"),
        (6, "empty content"),
        (7, "not valid UTF-8"),
        (8, "unknown role 'function'"),
        (9, "unknown type 'gossip'"),
        (10, "invalid timestamp 'yesterday'"),
        (11, "session_id must not contain '/'"),
    ]:
        assert f"{path}:{number}: {reason}" in report
    assert "imported 2, skipped 0 (already imported), errors 10" in report
    assert [r[3] for r in rows()] == ["fine line", "also fine"]


def test_a_dry_run_writes_nothing(tmp_path):
    path = write(tmp_path / "s.jsonl", {"role": "user", "content": "hello"})
    assert "would import 1" in migrate(str(path), "--dry-run")
    assert not MainMessage.objects.exists()


def test_imported_messages_get_token_counts_and_wait_for_their_embedding(tmp_path):
    migrate(str(write(tmp_path / "s.jsonl", {"role": "user", "content": "a message long enough"})))
    message = MainMessage.objects.get()
    assert message.token_count == 6 and message in MainMessage.objects.awaiting_embedding()


def test_an_export_whose_folder_holds_a_link_out_writes_nothing(tmp_path):
    message_add(agent_id="a0", session_id="s1", role="user", content="first in the export")
    message_add(agent_id="a1", session_id="s1", role="user", content="behind the link")
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "a1").symlink_to(elsewhere)

    with pytest.raises(UnsafePath, match=f"through the symbolic link {out / 'a1'} to {elsewhere}"):
        jsonl.export_sessions(out)

    assert list(out.iterdir()) == [out / "a1"]  # nor a0's file: every path is checked first
    assert list(elsewhere.iterdir()) == []


def test_export_then_import_into_an_empty_database_gives_the_same_rows(tmp_path):
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    message_add(
        agent_id="a1",
        session_id="s1",
        role="user",
        content="我的偏好：绿茶",
        msg_type="preference",
        metadata={"k": [1, {"x": None}]},
        timestamp=when,
    )
    message_add(agent_id="a1", session_id="s1", role="assistant", content="noted", timestamp=when)
    message_add(agent_id="a1", session_id="t:2", role="tool", content="result\nwith lines")
    message_add(agent_id="a2", session_id="s1", role="user", content="other agent")
    before = {a: rows(agent_id=a) for a in ("a1", "a2")}
    times = list(MainMessage.objects.order_by("id").values_list("timestamp", flat=True))

    call_command("export_jsonl", str(tmp_path / "out"), stdout=io.StringIO())
    MainMessage.objects.all().delete()
    for agent in ("a1", "a2"):
        migrate(str(tmp_path / "out" / agent), "--agent", agent)

    assert {a: rows(agent_id=a) for a in ("a1", "a2")} == before
    assert list(MainMessage.objects.order_by("id").values_list("timestamp", flat=True)) == times
    # ":" is escaped in the file name (not portable); every line names its session.
    assert sorted(p.name for p in (tmp_path / "out" / "a1").iterdir()) == [
        "s1.jsonl",
        "t%3A2.jsonl",
    ]


def test_the_backup_appends_every_stored_message_and_imports_back(
    settings, django_capture_on_commit_callbacks, tmp_path
):
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        message_add(agent_id="a1", session_id="s1", role="user", content="keep me safe")
        message_add(agent_id="a1", session_id="s1", role="user", content="me too")

    path = jsonl.backup_path("a1", "s1")
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert [line["content"] for line in lines] == ["keep me safe", "me too"]

    MainMessage.objects.all().delete()
    migrate(str(path), "--agent", "a1")
    assert [r[3] for r in rows()] == ["keep me safe", "me too"]


def test_the_example_file_imports_cleanly():
    assert "imported 6, skipped 0 (already imported), errors 0" in migrate(
        str(ROOT / "examples" / "jsonl")
    )


def test_reimporting_the_backup_brings_in_only_what_the_database_missed(
    settings, django_capture_on_commit_callbacks, tmp_path
):
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        message_add(
            agent_id="a1",
            session_id="s1",
            role="user",
            content="stored normally",
            metadata={"k": 1},
        )
        message_add(agent_id="a1", session_id="s1", role="assistant", content="this one too")
    jsonl.fallback_append(
        agent_id="a1",
        session_id="s1",
        messages=[
            {
                "role": "user",
                "content": "kept during an outage",
                "msg_type": "normal",
                "metadata": None,
            }
        ],
    )

    output = migrate(str(jsonl.backup_path("a1", "s1")), "--agent", "a1")

    assert "imported 1, skipped 2" in output
    assert [r[3] for r in rows()] == ["stored normally", "this one too", "kept during an outage"]


@pytest.mark.slow
def test_without_a_database_messages_go_to_jsonl_and_come_back_later(tmp_path):
    good, broken = str(tmp_path / "good.db"), str(tmp_path / "broken.db")
    manage(tmp_path, "migrate", "--no-input", ORCA_DB_PATH=good)
    key = last_line(manage(tmp_path, "create_api_key", "--agent", "a1", ORCA_DB_PATH=good))
    (tmp_path / "broken.db").mkdir()  # a directory: SQLite cannot open it
    post = (
        "import json; from django.test import Client; "
        f"r = Client(SERVER_NAME='localhost').post('/api/v1/sessions/s1/messages', "
        "data={'role': 'user', 'content': '断网时的消息'}, content_type='application/json', "
        f"headers={{'Authorization': 'Bearer {key}'}}); print(json.dumps([r.status_code, r.json()]))"
    )
    outage = manage(tmp_path, "shell", "-c", post, ORCA_DB_PATH=broken, ORCA_JSONL_BACKUP="1")

    status, body = json.loads(last_line(outage))
    assert (status, body["stored_in"]) == (202, "jsonl")
    assert "DATABASE UNAVAILABLE" in outage.stderr
    started = subprocess.run(
        [sys.executable, "-c", "import orca_memory.wsgi"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=service_env(tmp_path, ORCA_DB_PATH=broken, ORCA_JSONL_BACKUP="1"),
        timeout=60,
    )
    assert "THE DATABASE" in started.stderr and "CANNOT BE OPENED" in started.stderr  # at start-up
    assert "messages are kept in" in started.stderr
    refused = manage(tmp_path, "shell", "-c", post, ORCA_DB_PATH=broken)
    status, body = json.loads(last_line(refused))  # no backup: refused, and told to retry
    assert status == 503
    assert body["detail"] == (
        "the database is unavailable: its file cannot be opened. Nothing was changed; retry in 10 s"
    )

    folder = str(tmp_path / "data" / "jsonl" / "a1")
    back = manage(tmp_path, "migrate_jsonl", folder, "--agent", "a1", ORCA_DB_PATH=good)
    assert "imported 1" in back.stdout
    content = "from memory.models import MainMessage as M; print(M.objects.get().content)"
    assert last_line(manage(tmp_path, "shell", "-c", content, ORCA_DB_PATH=good)) == "断网时的消息"
