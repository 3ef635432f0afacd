"""Importers of what people have (`manage.py import_from`): ChatGPT's and Claude's data
exports and a JSON list of memories, from hand-written fixtures in tests/data/imports/ with
Chinese text, a branch a person edited away, and broken entries."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory import importers, index
from memory.importers import import_file, session_id_of
from memory.models import LongTermMemory, MainMessage

DATA = Path(__file__).parent / "data" / "imports"

pytestmark = pytest.mark.django_db


def _session(agent_id: str, session_id: str) -> list[tuple]:
    rows = MainMessage.objects.filter(agent_id=agent_id, session_id=session_id).order_by(
        "timestamp", "id"
    )
    return list(rows.values_list("role", "content", "timestamp"))


def test_it_imports_the_chosen_branch_of_a_chatgpt_export():
    report = import_file(DATA / "chatgpt_conversations.json", kind="chatgpt", agent_id="me")

    assert report.failure is None
    assert (report.imported, report.skipped) == (3, 0)
    assert report.errors == [
        (1, "message u2: unreadable create_time 'yesterday'"),
        (2, 'no "mapping" object'),
        (3, "a conversation must be an object"),
        (4, "message p1: author.role must be one of user, assistant, system, tool, not 'robot'"),
        (5, "current_node 'gone' is not a node of its mapping"),
    ]
    # The regenerated answer (a1) and the empty system turn are not in the session.
    assert _session("me", "conv-tea") == [
        ("user", "我最喜欢喝乌龙茶。", datetime.fromtimestamp(1709654401.25, tz=UTC)),
        ("assistant", "乌龙茶很香，我记住了。", datetime.fromtimestamp(1709654403.75, tz=UTC)),
    ]
    first = MainMessage.objects.get(session_id="conv-tea", role="user")
    assert first.metadata == {
        "imported_from": "chatgpt",
        "source_id": "u1",
        "conversation_title": "喝茶",
    }
    assert first.token_count > 0 and first.import_fingerprint
    # A message without a time takes the conversation's.
    assert _session("me", "photo") == [
        (
            "user",
            "[image_asset_pointer]\nWhat is in this photo?",
            datetime.fromtimestamp(1710000000, tz=UTC),
        )
    ]
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="me", query="乌龙茶", k=5)
    assert {hit.id for hit in hits} >= {first.pk}


def test_it_imports_a_claude_export():
    report = import_file(DATA / "claude_conversations.json", kind="claude", agent_id="me")

    assert (report.imported, report.skipped) == (2, 0)
    assert report.errors == [
        (1, "message m3: unreadable created_at 'not a date'"),
        (1, "message m4: sender must be human or assistant, not 'system'"),
        (2, 'no "chat_messages" list'),
    ]
    assert _session("me", "5f1c2a9e-0000-4000-8000-000000000001") == [
        ("user", "我下个月去东京。", datetime(2024, 3, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("assistant", "Have a good trip to Tokyo!", datetime(2024, 3, 1, 10, 0, 5, tzinfo=UTC)),
    ]


def test_it_imports_a_list_of_memories():
    report = import_file(DATA / "memories.json", kind="memories", agent_id="me")

    assert report.imported == 3
    assert report.errors == [
        (4, 'no text ("text", "memory" or "content")'),
        (5, "type must be text, not 5"),
        (6, "unreadable date 'someday'"),
        (7, "a memory must be an object"),
    ]
    memories = LongTermMemory.objects.filter(agent_id="me").order_by("id")
    assert list(memories.values_list("content", "memory_type", "valid_from")) == [
        ("User prefers green tea", "fact", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("用户住在上海", "fact", datetime(2023, 5, 1, tzinfo=UTC)),
        ("Decided to use PostgreSQL for the metrics store", "decision", None),
    ]


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("chatgpt", "chatgpt_conversations.json"),
        ("claude", "claude_conversations.json"),
        ("memories", "memories.json"),
    ],
)
def test_importing_the_same_export_twice_adds_nothing(kind, name):
    first = import_file(DATA / name, kind=kind, agent_id="me")
    counts = MainMessage.objects.count(), LongTermMemory.objects.count()

    again = import_file(DATA / name, kind=kind, agent_id="me")

    assert (again.imported, again.skipped) == (0, first.imported)
    assert again.errors == first.errors
    assert (MainMessage.objects.count(), LongTermMemory.objects.count()) == counts


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        ('{"conversations": []}', "the top level must be a list of conversations, not dict"),
        (
            "[{]",
            "not JSON (Expecting property name enclosed in double quotes: line 1 column 3 (char 2))",
        ),
        ("[NaN]", "NaN is not a number JSON allows"),
    ],
)
def test_it_reports_a_file_it_cannot_read(tmp_path, text, failure):
    path = tmp_path / "conversations.json"
    path.write_text(text)

    report = import_file(path, kind="claude", agent_id="me")

    assert (report.failure, report.imported) == (failure, 0)
    assert not MainMessage.objects.exists()


def test_a_dry_run_writes_nothing():
    report = import_file(
        DATA / "claude_conversations.json", kind="claude", agent_id="me", dry_run=True
    )

    assert report.imported == 2
    assert not MainMessage.objects.exists()


def test_a_database_error_on_an_entry_takes_back_that_entry_only(monkeypatch):
    from django.db import IntegrityError

    store = importers._store_conversation

    def fail_on_the_photo(kind, conversation, *args, **kwargs):
        store(kind, conversation, *args, **kwargs)
        if conversation.session_id == "photo":
            raise IntegrityError("refused")

    monkeypatch.setattr(importers, "_store_conversation", fail_on_the_photo)

    report = import_file(DATA / "chatgpt_conversations.json", kind="chatgpt", agent_id="me")

    assert report.imported == 2
    assert (4, "refused by the database (refused)") in report.errors
    assert not MainMessage.objects.filter(session_id="photo").exists()


def test_session_ids_are_made_valid():
    assert session_id_of("a/b\\c\u200bd", "x") == "a-b-c-d"
    assert session_id_of("..", "fallback-3") == "fallback-3"
    assert session_id_of(None, "fallback-3") == "fallback-3"
    assert session_id_of("长" * 100, "x") == "长" * 66  # 200 bytes, whole characters


def test_the_command_reports_each_entry():
    out = StringIO()
    with pytest.raises(
        CommandError, match="4 entry\\(s\\) or message\\(s\\) could not be imported"
    ):
        call_command("import_from", "memories", str(DATA / "memories.json"), agent="me", stdout=out)

    path = DATA / "memories.json"
    assert out.getvalue().splitlines() == [
        f"{path}: imported 3, skipped 0 (already imported), errors 4",
        f'  {path}: entry 4: no text ("text", "memory" or "content")',
        f"  {path}: entry 5: type must be text, not 5",
        f"  {path}: entry 6: unreadable date 'someday'",
        f"  {path}: entry 7: a memory must be an object",
        "1 file(s): imported 3, 4 entry(s) failed.",
    ]

    with pytest.raises(CommandError, match="could not be imported: the top level must be a list"):
        call_command(
            "import_from", "claude", str(DATA / "claude_not_a_list.json"), agent="me", stdout=out
        )
