"""Forget on request (memory.forgetting): a session, an agent, a query's matches, from every
copy (search in each mode, the context, the memory list, history, export, the backup and
`migrate_jsonl` of it, vectors after a re-embedding), with a receipt holding no content."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from memory import forgetting, idempotency, index, jsonl, vectors
from memory.context import context_build
from memory.forgetting import forget_agent, forget_confirmed, forget_preview, forget_session
from memory.memories import memories_of, memory_create, memory_delete, memory_update
from memory.models import (
    CONSOLIDATION,
    ConsolidationRun,
    ForgetReceipt,
    IdempotencyKey,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemorySource,
    ShortTermMemory,
    Trigger,
)
from memory.search import MODES, SearchQuery, search
from memory.validation import InvalidInput
from subagents.models import SubagentMessage
from tests.factories import add_message

pytestmark = pytest.mark.django_db

SECRET = "Lisbon"  # said only by what is forgotten


@pytest.fixture
def backup(settings, tmp_path: Path) -> Path:
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    return tmp_path / "jsonl"


@dataclasses.dataclass
class Story:
    said: MainMessage  # s1, the user: the secret
    reply: MainMessage  # s1, the assistant, with a sub-agent transcript
    tea: MainMessage  # s2
    trip: MainMessage  # s2, says the secret too
    only_from_s1: LongTermMemory  # its one source is `said`
    two_sources: LongTermMemory  # `said` and `tea`
    written: LongTermMemory  # `said`, and a person wrote it
    legacy: LongTermMemory  # no source rows, source_session s1


def _consolidated(content: str, *, session: str, sources: list[MainMessage]) -> LongTermMemory:
    memory = memory_create(
        agent_id="a1",
        content=content,
        memory_type="fact",
        actor=CONSOLIDATION,
        source_session=session,
    )
    for message in sources:
        MemorySource.objects.create(memory=memory, agent_id="a1", message=message)
    return memory


@pytest.fixture
def trip_text() -> str:
    return f"We flew to {SECRET} in May."


@pytest.fixture
def story(backup, fake_embedder, django_capture_on_commit_callbacks, trip_text) -> Story:
    with django_capture_on_commit_callbacks(execute=True):
        said = add_message(f"My sister Zelda lives in {SECRET} now.", summarize=False)
        reply = add_message(f"Noted: Zelda is in {SECRET}.", role="assistant", summarize=False)
        tea = add_message("I drink green tea every morning.", session_id="s2")
        trip = add_message(trip_text, session_id="s2")
        add_message("Tea keeps you awake.", role="assistant", session_id="s2", summarize=False)
        add_message(f"Zelda of agent two lives in {SECRET}.", agent_id="a2")
    SubagentMessage.objects.create(
        parent_msg=reply, agent_name="coder", role="assistant", content=f"{SECRET} looked up"
    )
    ShortTermMemory.objects.create(
        agent_id="a1", session_id="s1", content=f"Zelda moved to {SECRET}.", reply_id=reply.pk
    )
    only = _consolidated(f"Zelda lives in {SECRET}", session="s1", sources=[said])
    both = _consolidated("The user likes tea", session="s2", sources=[said, tea])
    written = _consolidated("Zelda is the user's sister", session="s1", sources=[said])
    MemorySource.objects.create(memory=written, agent_id="a1", written_by="api")
    legacy = memory_create(
        agent_id="a1",
        content=f"Zelda's flat in {SECRET} is small",
        memory_type="fact",
        actor=CONSOLIDATION,
        source_session="s1",
    )
    # Deleted earlier, the ordinary way: its history keeps its text.
    gone = _consolidated(f"Zelda visits {SECRET} often", session="s1", sources=[])
    memory_delete(gone, actor="api")
    memory_update(both, actor="api", content="The user likes green tea")
    ConsolidationRun.objects.create(agent_id="a1", session_id="s1", trigger=Trigger.SESSION_END)
    IdempotencyKey.objects.create(
        agent_id="a1", key="k1", fingerprint="f" * 64, message_ids=[said.pk]
    )
    vectors.embed_pending()
    return Story(said, reply, tea, trip, only, both, written, legacy)


def _everywhere(agent_id: str, tmp_path: Path, gone: ForgetReceipt) -> list[str]:
    """Every place the secret, or a forgotten message, could still be read from."""
    found = []
    for mode in MODES:
        result = search(agent_id=agent_id, query=SearchQuery(text=SECRET, mode=mode, k=50))
        found += [
            f"search {mode}: {h.message.content}"
            for h in result.hits
            if SECRET in h.message.content or h.message.id in gone.ids["messages"]
        ]
    built = context_build(agent_id=agent_id, session_id="s2", query=SECRET, model_window=8192)
    found += [f"context: {m['content']}" for m in built.messages if SECRET in m["content"]]
    found += [f"memory: {m.content}" for m in memories_of(agent_id) if SECRET in m.content]
    found += [f"memory search: {m.content}" for m in memories_of(agent_id, query=SECRET)]
    for row in LongTermMemoryHistory.objects.filter(agent_id=agent_id):
        if SECRET in f"{row.old_content} {row.new_content} {row.changes} {row.old_values}":
            found.append(f"history #{row.pk}")
    found += [
        f"summary: {s.content}"
        for s in ShortTermMemory.objects.filter(agent_id=agent_id)
        if SECRET in s.content
    ]
    export = tmp_path / "export"
    call_command("export_jsonl", str(export), "--agent", agent_id, stdout=io.StringIO())
    found += [f"export {p.name}" for p in export.rglob("*.jsonl") if SECRET in p.read_text()]
    return found


def _backup_comes_back(backup: Path, agent_id: str) -> list[str]:
    """What `migrate_jsonl` of the agent's backup folder brings back that says the secret."""
    folder = backup / agent_id
    if folder.exists():
        call_command(
            "migrate_jsonl",
            str(folder),
            "--agent",
            agent_id,
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    return list(
        MainMessage.objects.filter(agent_id=agent_id, content__contains=SECRET).values_list(
            "content", flat=True
        )
    )


def _receipts_text() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM forget_receipts")
        return repr(cursor.fetchall())


def _reembedded_hits(fake_embedder) -> list[int]:
    call_command("reembed", stdout=io.StringIO(), stderr=io.StringIO())
    vectors.embed_pending()
    result = search(agent_id="a1", query=SearchQuery(text=SECRET, mode="vector", k=50))
    return [hit.message.id for hit in result.hits if SECRET in hit.message.content]


@pytest.mark.parametrize("trip_text", ["We flew to Porto in May."])  # the secret is s1's
def test_it_forgets_a_session_everywhere_with_a_receipt(
    story, backup, tmp_path, fake_embedder, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        receipt = forget_session(agent_id="a1", session_id="s1", actor="api")

    assert receipt.scope == "session" and receipt.session_id == "s1"
    assert receipt.counts == {
        "messages": 2,
        "summaries": 1,
        "memories": 2,  # only_from_s1 and legacy
        "history": 4,  # their creations, and the earlier-deleted one's two rows
        "consolidation_runs": 1,
        "idempotency_keys": 1,
        "transcripts": 1,
        "memory_sources": 2,  # two_sources and written lose `said`
        "backup_lines": 2,
    }
    assert receipt.ids["messages"] == [story.said.pk, story.reply.pk]
    assert receipt.ids["memories"] == sorted([story.only_from_s1.pk, story.legacy.pk])
    assert _everywhere("a1", tmp_path, receipt) == []
    assert _backup_comes_back(backup, "a1") == []
    assert _reembedded_hits(fake_embedder) == []
    assert SECRET not in _receipts_text() and "Zelda" not in _receipts_text()
    # What else the session fed stays, without the forgotten source.
    assert set(LongTermMemory.objects.values_list("pk", flat=True)) == {
        story.two_sources.pk,
        story.written.pk,
    }
    # The person who reworded it is a source too (memories.memory_update).
    assert set(
        MemorySource.objects.filter(memory=story.two_sources).values_list(
            "message_id", "written_by"
        )
    ) == {(story.tea.pk, None), (None, "api")}
    assert not ConsolidationRun.objects.filter(session_id="s1").exists()
    assert not SubagentMessage.objects.exists()
    assert IdempotencyKey.objects.get(key="k1").fingerprint == idempotency.FORGOTTEN
    # Another agent's copy of the words is untouched.
    assert MainMessage.objects.filter(agent_id="a2", content__contains=SECRET).count() == 1


def test_it_forgets_a_whole_agent_and_leaves_the_others(
    story, backup, tmp_path, fake_embedder, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        receipt = forget_agent(agent_id="a1", actor="api")

    assert receipt.counts["messages"] == 5
    assert receipt.counts["memories"] == 4
    assert receipt.counts["backup_lines"] == 5
    assert not MainMessage.objects.filter(agent_id="a1").exists()
    assert not LongTermMemoryHistory.objects.filter(agent_id="a1").exists()
    assert not MemorySource.objects.filter(agent_id="a1").exists()
    assert _everywhere("a1", tmp_path, receipt) == []
    assert not (backup / "a1").exists() or not list((backup / "a1").rglob("*.jsonl"))
    assert _backup_comes_back(backup, "a1") == []
    assert SECRET not in _receipts_text()
    assert MainMessage.objects.filter(agent_id="a2").count() == 1
    assert len(jsonl.backup_path("a2", "s1").read_text().splitlines()) == 1
    assert forget_agent(agent_id="a1", actor="api") is None  # nothing left: no receipt


def test_a_query_preview_lists_what_its_confirm_deletes(
    story, backup, tmp_path, fake_embedder, django_capture_on_commit_callbacks
):
    preview = forget_preview(agent_id="a1", query=f"{SECRET.lower()}")

    assert preview.terms == ["lisbon"]
    assert preview.ids["messages"] == [story.said.pk, story.reply.pk, story.trip.pk]
    assert story.only_from_s1.pk in preview.ids["memories"]
    assert story.legacy.pk in preview.ids["memories"]  # it says the word itself
    assert story.two_sources.pk not in preview.ids["memories"]  # tea is still a source
    assert all(
        SECRET in item.snippet
        for item in preview.items
        if item.kind != "memories" or item.id != story.written.pk
    )
    assert MainMessage.objects.filter(content__contains=SECRET, agent_id="a1").count() == 3

    with django_capture_on_commit_callbacks(execute=True):
        receipt, repeated = forget_confirmed(agent_id="a1", token=preview.token, actor="api")

    assert not repeated
    assert receipt.counts == preview.counts
    assert receipt.ids == preview.ids
    assert _everywhere("a1", tmp_path, receipt) == []
    assert _backup_comes_back(backup, "a1") == []
    assert _reembedded_hits(fake_embedder) == []
    assert SECRET not in _receipts_text() and "lisbon" not in _receipts_text()
    # The rest of session s2 stays, and the message after the forgotten one lost its text
    # from its context: a lexical search for the secret finds nothing through it.
    assert MainMessage.objects.filter(agent_id="a1").count() == 2
    assert index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=SECRET, k=10) == []
    assert LongTermMemory.objects.filter(pk=story.written.pk).exists()

    again, repeated = forget_confirmed(agent_id="a1", token=preview.token, actor="api")
    assert repeated and again.pk == receipt.pk
    assert ForgetReceipt.objects.count() == 1


def test_a_confirm_of_another_agents_or_a_forged_token_is_refused(story):
    preview = forget_preview(agent_id="a2", query=SECRET)
    with pytest.raises(InvalidInput, match="another agent"):
        forget_confirmed(agent_id="a1", token=preview.token, actor="api")
    with pytest.raises(InvalidInput, match="not a preview"):
        forget_confirmed(agent_id="a1", token=preview.token[:-2] + "xx", actor="api")
    assert MainMessage.objects.count() == 6
    assert not ForgetReceipt.objects.exists()


def test_a_query_matches_whole_words_said_by_the_row_itself():
    add_message("Lisbon is lovely")
    add_message("Lisboners are not Lisbon people")  # both words, one whole
    add_message("Paris, not the other one")  # its context holds "Lisbon"
    add_message("LISBON in capitals")

    preview = forget_preview(agent_id="a1", query="lisbon")

    contents = MainMessage.objects.in_bulk(preview.ids["messages"])
    assert sorted(m.content for m in contents.values()) == [
        "LISBON in capitals",
        "Lisbon is lovely",
        "Lisboners are not Lisbon people",
    ]


def test_a_query_with_nothing_to_match_is_refused():
    with pytest.raises(InvalidInput, match="nothing to search for"):
        forget_preview(agent_id="a1", query="  ?! ")


def test_the_backup_rewrite_keeps_other_lines_byte_for_byte(
    backup, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        add_message("keep this one")
        add_message(f"forget {SECRET}")
        add_message("keep that one too")
    path = jsonl.backup_path("a1", "s1")
    before = path.read_bytes().splitlines(keepends=True)
    with path.open("ab") as f:
        f.write(b"not json at all\n")

    with django_capture_on_commit_callbacks(execute=True):
        preview = forget_preview(agent_id="a1", query=SECRET)
        forget_confirmed(agent_id="a1", token=preview.token, actor="api")

    assert path.read_bytes() == before[0] + before[2] + b"not json at all\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("scope", ["session", "agent"])
def test_a_message_stored_while_its_session_is_forgotten_keeps_its_backup_line(
    scope, backup, django_capture_on_commit_callbacks, monkeypatch
):
    with django_capture_on_commit_callbacks(execute=True):
        add_message(f"forget {SECRET}")
    plan = forgetting.session_plan if scope == "session" else forgetting.agent_plan

    def planned_then_a_post(**scope_of):
        # The plan is made; a client's next message is acknowledged before the forget runs.
        made = plan(**scope_of)
        with django_capture_on_commit_callbacks(execute=True):
            add_message("stored while the forget ran")
        return made

    monkeypatch.setattr(forgetting, f"{scope}_plan", planned_then_a_post)
    with django_capture_on_commit_callbacks(execute=True):
        if scope == "session":
            forget_session(agent_id="a1", session_id="s1", actor="api")
        else:
            forget_agent(agent_id="a1", actor="api")

    kept = jsonl.backup_path("a1", "s1").read_text("utf-8")
    assert "stored while the forget ran" in kept and SECRET not in kept


def test_a_receipt_is_written_with_the_deletion_or_not_at_all(story, backup, monkeypatch):
    lines = jsonl.backup_path("a1", "s1").read_bytes()

    def fail(**_):
        raise RuntimeError("the receipt could not be written")

    monkeypatch.setattr(ForgetReceipt.objects, "create", fail)
    with pytest.raises(RuntimeError):
        forget_session(agent_id="a1", session_id="s1", actor="api")

    assert MainMessage.objects.filter(session_id="s1", agent_id="a1").count() == 2
    assert LongTermMemory.objects.count() == 4
    assert jsonl.backup_path("a1", "s1").read_bytes() == lines


def test_the_preview_deletes_nothing(story):
    counts = {m: m.objects.count() for m in (MainMessage, LongTermMemory, LongTermMemoryHistory)}
    forget_preview(agent_id="a1", query=SECRET)
    assert {m: m.objects.count() for m in counts} == counts


def test_a_query_too_broad_is_refused(monkeypatch):
    monkeypatch.setattr(forgetting, "MAX_MATCHES", 2)
    for _ in range(3):
        add_message("tea again")
    with pytest.raises(InvalidInput, match="more than 2 messages"):
        forget_preview(agent_id="a1", query="tea")
