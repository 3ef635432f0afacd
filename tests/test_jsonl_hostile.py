"""migrate_jsonl against hostile files: no line or file stops the run, each is reported as
`file:line: reason`, a refused line takes back nothing else, and --dry-run refuses exactly
what the import refuses.

HOSTILE_LINES is the table: a raw line and the reason it is reported with. Add a finding as
a row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError

from memory import jsonl_import
from memory.models import MainMessage

pytestmark = pytest.mark.django_db

MAX_CONTENT_BYTES = 1000


def line(**fields: object) -> bytes:
    return json.dumps({"role": "user", "content": "x", **fields}).encode()


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"k": value}
    return value


# (raw line, the reason reported for it)
HOSTILE_LINES = [
    (line(timestamp="2024-02-30T00:00:00"), "invalid timestamp '2024-02-30T00:00:00' (day is"),
    (line(timestamp=1e20), "invalid timestamp 1e+20"),
    (line(timestamp=-1e12), "invalid timestamp -1000000000000.0"),
    (b'{"role": "user", "content": "x", "timestamp": Infinity}', "Infinity is not a number"),
    (b'{"role": "user", "content": "x", "timestamp": NaN}', "NaN is not a number JSON allows"),
    (line(timestamp="9999-12-31T23:30:00-01:00"), "invalid timestamp '9999-12-31T23:30:00-01:00'"),
    (line(timestamp="0001-01-01T00:30:00+01:00"), "invalid timestamp '0001-01-01T00:30:00+01:00'"),
    (line(timestamp=True), "invalid timestamp True"),
    (
        b'{"role": "user", "content": "x", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "malformed JSON (nested too deeply)",
    ),
    (b'{"role": "user", "content": "x", "metadata": {"x": NaN}}', "NaN is not a number"),
    (b'{"role": "user", "content": "x", "metadata": {"x": 1e400}}', "number '1e400' is out of"),
    (b'{"role": "user", "content": "x", "metadata": {"x": ' + b"1" * 5000 + b"}}", "malformed"),
    (b'{"role": "user", "content": "lone \\ud800"}', "content is not valid UTF-8"),
    (
        b'{"role": "user", "content": "x", "metadata": {"\\udc80": 1}}',
        "metadata is not valid UTF-8",
    ),
    (b'{"role": "user", "content": "x", "metadata": {"k": "\\udfff"}}', "metadata is not valid"),
    (b'{"role": "user", "content": "nul \\u0000"}', "content must not contain NUL"),
    (line(metadata=nested(25)), "metadata is nested deeper than 20 levels"),
    (line(content="x" * (MAX_CONTENT_BYTES + 1)), f"larger than {MAX_CONTENT_BYTES} bytes"),
    (
        line(metadata={"k": "x" * 64 * 1024}),  # 64 KiB + 8 as compact JSON
        "metadata is larger than 65536 bytes",
    ),
    (line(session_id=5), "session_id must be text"),
    (line(session_id=".."), "session_id must not be only dots"),
    (line(role=["user"]), "unknown role ['user']"),
    (line(role="x" * 10_000), "unknown role 'xxxxxxxx"),  # quoted, cut
    (b"\xff\xfe{}", "not valid UTF-8"),
]


@pytest.fixture(autouse=True)
def _small_content_limit(settings):
    settings.ORCA = dataclasses.replace(settings.ORCA, max_content_bytes=MAX_CONTENT_BYTES)


def hostile_file(path):
    """Every hostile line between good ones; returns {line number: expected reason}."""
    raw = [b'\xef\xbb\xbf{"role": "user", "content": "good 0"}']  # a byte-order mark first
    expected = {}
    for number, (hostile, reason) in enumerate(HOSTILE_LINES, 1):
        raw += [hostile, line(content=f"good {number}")]
        expected[2 * number] = reason
    path.write_bytes(b"\n".join(raw) + b"\n")
    return expected


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # raised when a line failed: the output says why
        call_command("migrate_jsonl", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def reported(output: str) -> dict[int, str]:
    return {int(n): reason for n, reason in re.findall(r"\.jsonl:(\d+): (.*)", output)}


def test_each_hostile_line_is_reported_and_every_good_line_imports(tmp_path):
    path = tmp_path / "hostile.jsonl"
    expected = hostile_file(path)

    output = run(str(path))

    got = reported(output)
    assert sorted(got) == sorted(expected)
    for number, reason in expected.items():
        assert got[number].startswith(reason) or reason in got[number], (number, got[number])
    assert all(len(reason) < 200 for reason in got.values())
    good = [f"good {n}" for n in range(len(HOSTILE_LINES) + 1)]
    assert sorted(MainMessage.objects.values_list("content", flat=True)) == sorted(good)
    assert f"imported {len(good)}, skipped 0 (already imported), errors {len(expected)}" in output


def test_a_dry_run_refuses_exactly_what_the_import_refuses(tmp_path):
    path = tmp_path / "hostile.jsonl"
    hostile_file(path)

    dry = run(str(path), "--dry-run")
    assert not MainMessage.objects.exists()
    real = run(str(path))

    assert reported(dry) == reported(real)
    assert dry.replace("would import", "imported") == real


def test_a_dry_run_counts_a_line_repeated_in_two_files_once(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_bytes(line(session_id="s1", timestamp="2026-01-01T00:00:00Z"))
    assert "would import 1, 1 line(s) failed" not in run(str(tmp_path), "--dry-run")
    assert "2 file(s): would import 1, 0 line(s) failed." in run(str(tmp_path), "--dry-run")
    assert "2 file(s): imported 1, 0 line(s) failed." in run(str(tmp_path))


def test_a_bad_file_is_reported_and_the_others_import(tmp_path):
    (tmp_path / "folder.jsonl").mkdir()  # a folder named like a file: searched, not read
    (tmp_path / "folder.jsonl" / "inner.jsonl").write_bytes(line(content="inner"))
    os.mkfifo(tmp_path / "pipe.jsonl")  # opening it would wait forever
    (tmp_path / "broken.jsonl").symlink_to(tmp_path / "missing")
    (tmp_path / "z.jsonl").write_bytes(line(content="last"))

    output = run(str(tmp_path))

    assert f"{tmp_path / 'pipe.jsonl'}: not a regular file" in output
    assert f"{tmp_path / 'broken.jsonl'}: not found" in output
    assert "2 file(s) failed" in output
    assert sorted(MainMessage.objects.values_list("content", flat=True)) == ["inner", "last"]


def test_a_line_the_database_refuses_takes_back_only_itself(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(line(content=c) for c in ("one", "refused", "three")) + b"\n")
    real = jsonl_import.messages.message_add

    def refuse_after_writing(**fields):
        message = real(**fields)  # written, then refused: its savepoint must take it back
        if fields["content"] == "refused":
            raise IntegrityError("CHECK constraint failed")
        return message

    monkeypatch.setattr(jsonl_import.messages, "message_add", refuse_after_writing)
    output = run(str(path))

    assert f"{path}:2: refused by the database (CHECK constraint failed)" in output
    assert sorted(MainMessage.objects.values_list("content", flat=True)) == ["one", "three"]


@pytest.mark.django_db(transaction=True)
def test_lines_are_committed_in_batches_so_a_crash_keeps_the_batches_before_it(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(jsonl_import, "BATCH_LINES", 2)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(line(content=f"m{i}") for i in range(5)) + b"\n")
    real = jsonl_import.messages.message_add

    def crash_on_m3(**fields):
        if fields["content"] == "m3":
            raise KeyboardInterrupt("killed")
        return real(**fields)

    monkeypatch.setattr(jsonl_import.messages, "message_add", crash_on_m3)
    with pytest.raises(KeyboardInterrupt):
        run(str(path))
    assert sorted(MainMessage.objects.values_list("content", flat=True)) == ["m0", "m1"]

    monkeypatch.setattr(jsonl_import.messages, "message_add", real)
    assert "imported 3, skipped 2" in run(str(path))
    assert MainMessage.objects.count() == 5


def test_messages_kept_during_an_outage_come_back_and_the_rest_are_reported(
    api, settings, monkeypatch, tmp_path
):
    """Database down, JSONL fallback on: messages accepted (202), hostile ones among them;
    database back: migrate_jsonl imports every accepted message it can and reports the rest."""
    from django.db import OperationalError

    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    sent = [
        (":" * 200, {"content": "a 200-byte id, 600 bytes once escaped"}),
        ("中" * 66, {"content": "a 198-byte Chinese id"}),
        ("..", {"content": "refused: only dots"}),
        ("s1", {"content": "plain"}),
        ("s1", {"content": "emoji 🐳", "metadata": {"deep": nested(5)}}),
        ("s1", {"content": "not finite", "metadata": {"x": float("nan")}}),
    ]

    def database_down(*rows, **options):
        raise OperationalError("unable to open database file")

    monkeypatch.setattr(MainMessage.objects, "bulk_create", database_down)
    answers = {}
    for session, body in sent:
        response = api.post(
            f"/sessions/{session}/messages", json.dumps({"role": "user", **body}, allow_nan=True)
        )
        answers[body["content"]] = response.status_code
    monkeypatch.undo()
    assert answers["refused: only dots"] == 422
    kept = {content for content, status in answers.items() if status == 202}
    assert kept >= {"a 200-byte id, 600 bytes once escaped", "a 198-byte Chinese id", "plain"}

    output = run(str(tmp_path / "jsonl" / "agent-a"), "--agent", "agent-a")

    imported = set(MainMessage.objects.values_list("content", flat=True))
    failed = reported(output)
    assert imported | ({"not finite"} if failed else set()) == kept
    assert list(failed.values()) == (
        ["NaN is not a number JSON allows"] if "not finite" in kept else []
    )
    assert MainMessage.objects.get(content="a 200-byte id, 600 bytes once escaped").session_id == (
        ":" * 200
    )
