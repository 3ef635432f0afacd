"""Consolidation into long-term memory: curated text, deferral inside the 30 s window,
incremental runs, and dedup through the index."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from functools import partial
from importlib import import_module

import pytest
from django.core.management import call_command
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory import consolidation, embeddings, tasks, vectors
from memory.consolidation import request_consolidation
from memory.extraction import Extracted, speaks_for_a_person
from memory.memories import by_a_person, memory_create
from memory.messages import SessionEnded, session_end
from memory.models import (
    AUTOMATIC_ACTORS,
    CLEANUP,
    CONSOLIDATION,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
)
from memory.text import text_similarity
from tests.factories import add_message, consolidate_session
from tests.fakes import FakeEmbedder
from tests.helpers import last_line, manage

pytestmark = pytest.mark.django_db


# The agent of the `api` fixture, which some tests here use beside it.
say = partial(add_message, agent_id="agent-a")


class Clock:
    """`timezone.now()` under the test's control: the window and the worker's queue read it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(timezone.now().replace(microsecond=0))
    monkeypatch.setattr(timezone, "now", clock)
    return clock


@pytest.fixture
def one_memory_per_message(monkeypatch):
    """The rule extractor as a stand-in that keeps every message whose speaker counts (the
    user's; an assistant's only when named, as the real one decides): these tests are about
    which messages a run reads, not about the rules (tests/test_extraction.py)."""
    monkeypatch.setattr(
        consolidation,
        "extract_with_sources",
        lambda messages: [
            (Extracted("fact", m.content), [m]) for m in messages if speaks_for_a_person(m)
        ],
    )


@pytest.fixture
def chat_answers(chat):
    """The chat model, answering these texts in turn."""
    return chat[0]


def unique_text(i: int) -> str:
    """Texts that share no wording, so that no two of them merge."""
    return f"note {hashlib.sha256(str(i).encode()).hexdigest()[:24]}"


def runs() -> list[tuple]:
    return list(
        ConsolidationRun.objects.order_by("id").values_list(
            "session_id", "trigger", "status", "created", "merged"
        )
    )


# --- curated text --------------------------------------------------------------------------


def test_a_curated_memorys_text_survives_a_merge(api, one_memory_per_message):
    created = api.post(
        "/memories", {"content": "I prefer green tea in the morning", "memory_type": "fact"}
    ).json()
    assert created["curated"] is True
    say("I prefer green tea in the mornings.")  # > 0.8 similar: a merge

    run = consolidate_session(agent_id="agent-a", session_id="s1", trigger="session_end")

    assert (run.created, run.merged) == (0, 1)
    body = api.get(f"/memories/{created['id']}").json()
    assert body["content"] == "I prefer green tea in the morning"
    assert (body["source_count"], body["confidence"]) == (2, pytest.approx(0.6))
    memory = LongTermMemory.objects.get(pk=created["id"])
    assert (memory.content, memory.curated) == ("I prefer green tea in the morning", True)
    merge = LongTermMemoryHistory.objects.get(memory_id=memory.pk, action="merge")
    assert merge.actor == "consolidation"
    assert merge.old_content is None  # the text did not change
    assert merge.changes == {
        "confidence": pytest.approx(0.6),
        "source_count": 2,
        "proposed_content": "I prefer green tea in the mornings.",
        "content_kept": "curated",
        "consolidation_run": run.pk,
    }


def test_an_uncurated_memory_takes_the_newer_wording(clock, one_memory_per_message):
    say("I prefer green tea in the morning")
    consolidate_session(agent_id="agent-a", session_id="s1", trigger="session_end")
    memory = LongTermMemory.objects.get()
    assert memory.curated is False
    say("I prefer green tea in the mornings.", session_id="s2")
    clock.advance(30)

    consolidate_session(agent_id="agent-a", session_id="s2", trigger="session_end")

    memory.refresh_from_db()
    assert (memory.content, memory.source_count) == ("I prefer green tea in the mornings.", 2)


def test_a_person_rewording_a_consolidated_memory_curates_it(api, one_memory_per_message):
    say("I like jazz on Sundays.")
    consolidate_session(agent_id="agent-a", session_id="s1", trigger="session_end")
    memory = LongTermMemory.objects.get()

    api.patch(f"/memories/{memory.pk}", {"confidence": 0.9})
    memory.refresh_from_db()
    assert memory.curated is False  # a new confidence is not a new text

    response = api.patch(f"/memories/{memory.pk}", {"content": "Likes jazz, mostly on Sundays"})

    assert response.json()["curated"] is True
    memory.refresh_from_db()
    assert memory.curated is True
    update = LongTermMemoryHistory.objects.filter(memory_id=memory.pk).latest("id")
    assert (update.actor, update.changes) == ("api", {"curated": True})


# --- deferral inside the 30-second window --------------------------------------------------


def test_a_session_ended_within_30_s_of_another_is_still_consolidated(
    api, clock, one_memory_per_message
):
    api.post("/sessions/s1/messages", {"role": "user", "content": "I prefer green tea."})
    api.post("/sessions/s2/messages", {"role": "user", "content": "We deploy on Fridays."})
    window_end = clock.now + timedelta(seconds=30)

    first = api.post("/sessions/s1/end")
    clock.advance(5)
    second = api.post("/sessions/s2/end")

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json() == {"session_id": "s1", "consolidation": "queued", "run_after": None}
    assert second.json()["consolidation"] == "deferred"
    assert parse_datetime(second.json()["run_after"]) == window_end
    waiting = ConsolidationRun.objects.get(session_id="s2")
    assert (waiting.status, waiting.run_after) == ("deferred", window_end)
    assert not LongTermMemory.objects.filter(source_session="s2").exists()

    clock.advance(25)
    tasks.consolidation_task.call(waiting.pk)  # what the worker does at run_after

    assert runs() == [
        ("s1", "session_end", "done", 1, 0),
        ("s2", "session_end", "done", 1, 0),
    ]
    assert LongTermMemory.objects.get(source_session="s2").content == "We deploy on Fridays."


def test_a_deferred_run_still_inside_the_window_waits_again(clock, one_memory_per_message):
    for i, session in enumerate(("s1", "s2")):
        say(unique_text(i), session_id=session)
    consolidate_session(agent_id="agent-a", session_id="s1")
    waiting = request_consolidation(agent_id="agent-a", session_id="s2", trigger="session_end")

    clock.advance(10)  # a worker running it early
    tasks.consolidation_task.call(waiting.pk)

    waiting.refresh_from_db()
    assert (waiting.status, waiting.run_after) == ("deferred", clock.now + timedelta(seconds=20))
    assert not LongTermMemory.objects.filter(source_session="s2").exists()


def test_ends_of_a_waiting_session_join_its_run(api, clock):
    api.post("/sessions/s1/messages", {"role": "user", "content": "hello"})
    api.post("/sessions/s2/messages", {"role": "user", "content": "hello again"})
    api.post("/sessions/s1/end")

    answers = [api.post("/sessions/s2/end").json() for _ in range(3)]

    assert {a["consolidation"] for a in answers} == {"deferred"}
    assert len({a["run_after"] for a in answers}) == 1
    assert ConsolidationRun.objects.filter(session_id="s2").count() == 1


def test_session_end_asks_for_the_sessions_run_and_says_which(clock):
    say("hello", session_id="s1")

    ended = session_end(agent_id="agent-a", session_id="s1")

    assert ended == SessionEnded(session_id="s1", consolidation="queued", run_after=None)
    run = ConsolidationRun.objects.get()
    assert (run.session_id, run.trigger) == ("s1", "session_end")


def test_session_end_finds_no_session_of_another_agent_and_asks_nothing(db):
    say("hello", session_id="s1")

    assert session_end(agent_id="agent-b", session_id="s1") is None
    assert session_end(agent_id="agent-a", session_id="s2") is None
    assert not ConsolidationRun.objects.exists()


def test_the_api_answers_the_run_session_end_asked_for(api, clock):
    # POST /sessions/{id}/end goes through session_end: a second end joins its run.
    say("hello", session_id="s1")
    say("hello again", session_id="s2")
    session_end(agent_id="agent-a", session_id="s1")

    ended = session_end(agent_id="agent-a", session_id="s2")
    response = api.post("/sessions/s2/end")

    assert ended is not None and ended.run_after == clock.now + timedelta(seconds=30)
    assert response.status_code == 202
    assert response.json() == {
        "session_id": "s2",
        "consolidation": "deferred",
        "run_after": ended.run_after.isoformat().replace("+00:00", "Z"),
    }
    assert ConsolidationRun.objects.filter(session_id="s2").count() == 1


def test_sessions_ended_in_a_burst_wait_30_s_apart(api, clock):
    for session in ("s1", "s2", "s3"):
        api.post(f"/sessions/{session}/messages", {"role": "user", "content": "hello"})
    start = clock.now

    answers = [api.post(f"/sessions/{session}/end").json() for session in ("s1", "s2", "s3")]

    assert [a["consolidation"] for a in answers] == ["queued", "deferred", "deferred"]
    assert [parse_datetime(a["run_after"]) for a in answers[1:]] == [
        start + timedelta(seconds=30),
        start + timedelta(seconds=60),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_worker_consolidates_every_session_of_a_quick_replay(
    api, clock, settings, one_memory_per_message
):
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    sessions = [f"s{i}" for i in range(4)]
    for i, session in enumerate(sessions):
        api.post(f"/sessions/{session}/messages", {"role": "user", "content": unique_text(i)})
        api.post(f"/sessions/{session}/messages", {"role": "assistant", "content": "Noted."})
        assert api.post(f"/sessions/{session}/end").status_code == 202
        clock.advance(1)

    def drain() -> None:
        call_command("db_worker", "--batch", "--no-startup-delay", "--interval", "0")

    drain()
    assert [status for _, _, status, _, _ in runs()] == ["done", *["deferred"] * 3]
    for _ in sessions[1:]:
        clock.advance(30)
        drain()

    assert runs() == [(session, "session_end", "done", 1, 0) for session in sessions]
    assert LongTermMemory.objects.count() == len(sessions)
    assert not DBTaskResult.objects.exclude(status="SUCCESSFUL").exists()


# --- what each run covers ------------------------------------------------------------------


def test_a_40_turn_session_stored_in_a_burst_writes_at_most_2_turn_runs(
    clock, one_memory_per_message
):
    replies = []
    for i in range(40):
        say(unique_text(i))
        replies.append(say(f"answer {i}", role="assistant"))
    for reply in replies:  # the worker catching up after the burst
        tasks.summarize_turn_task.call(reply.pk)

    assert runs() == [("s1", "turns", "done", 20, 0), ("s1", "turns", "deferred", 0, 0)]
    second = ConsolidationRun.objects.get(status="deferred")
    assert second.last_message_id == replies[-1].pk
    clock.advance(30)
    tasks.consolidation_task.call(second.pk)

    # Ending the session afterwards consolidates only what is left: one more message.
    say(unique_text(40))
    clock.advance(30)
    end = consolidate_session(agent_id="agent-a", session_id="s1")

    assert end.last_message_id == replies[-1].pk + 1
    assert runs() == [
        ("s1", "turns", "done", 20, 0),
        ("s1", "turns", "done", 20, 0),
        ("s1", "session_end", "done", 1, 0),
    ]
    assert LongTermMemory.objects.count() == 41
    assert set(LongTermMemory.objects.values_list("source_count", flat=True)) == {1}


def test_replies_and_the_end_join_a_run_still_waiting_in_the_queue(
    settings, one_memory_per_message
):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    replies = []
    for i in range(45):
        say(unique_text(i))
        replies.append(say(f"answer {i}", role="assistant"))
    for reply in replies:
        tasks.summarize_turn_task.call(reply.pk)
    say(unique_text(45))
    request_consolidation(agent_id="agent-a", session_id="s1", trigger="session_end")

    (waiting,) = ConsolidationRun.objects.all()
    assert (waiting.status, waiting.trigger, waiting.last_message_id) == (
        "queued",
        "session_end",
        None,  # an end takes everything there is when the run starts
    )
    tasks.consolidation_task.call(waiting.pk)

    assert runs() == [("s1", "session_end", "done", 46, 0)]


def test_running_a_session_again_does_not_merge_the_same_items_again(clock, one_memory_per_message):
    say("I prefer green tea.")
    consolidate_session(agent_id="agent-a", session_id="s1")
    clock.advance(30)

    again = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (again.status, again.reason) == ("done", "nothing new since the session's last run")
    memory = LongTermMemory.objects.get()
    assert (memory.source_count, memory.confidence) == (1, 0.5)


def test_when_the_chat_model_fails_the_rules_extract_and_the_next_run_asks_it_again(
    clock, chat_answers, one_memory_per_message
):
    from memory.models import ShortTermMemory

    say("I live in Lyon.")
    ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content="Ana: Lyon")
    chat_answers += ["not json", "still not json"]
    first = consolidate_session(agent_id="agent-a", session_id="s1")
    clock.advance(30)
    say("I work in Geneva.")
    ShortTermMemory.objects.create(agent_id="agent-a", session_id="s1", content="Ana: Geneva")
    chat_answers.append('{"memories": [{"type": "fact", "content": "Ana works in Geneva"}]}')

    second = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (first.status, first.extractor, first.created, first.reason) == (
        "done",
        "rules",
        1,
        "the chat model's answer was not valid JSON, twice: the rules extracted instead",
    )
    assert (second.status, second.extractor, second.created) == ("done", "llm", 1)
    assert sorted(LongTermMemory.objects.values_list("content", flat=True)) == [
        "Ana works in Geneva",
        "I live in Lyon.",
    ]


def test_a_run_going_on_past_30_s_keeps_the_agent_waiting(clock, one_memory_per_message):
    say("I prefer green tea.")
    ConsolidationRun.objects.create(
        agent_id="agent-a",
        session_id="s0",
        trigger="session_end",
        status="running",
        extractor="llm",
        started_at=clock.now - timedelta(seconds=40),  # a slow chat model
    )

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.status, run.run_after) == ("deferred", clock.now + timedelta(seconds=30))
    assert run.reason == "another run of the agent is still going: deferred to run_after"


def test_a_run_whose_worker_died_is_failed_and_no_longer_blocks_the_agent(
    clock, one_memory_per_message
):
    say("I prefer green tea.")
    ConsolidationRun.objects.create(
        agent_id="agent-a",
        session_id="s0",
        trigger="session_end",
        status="running",
        extractor="rules",
        started_at=clock.now,
    )
    clock.advance(11 * 60)

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.status, run.created) == ("done", 1)
    dead = ConsolidationRun.objects.get(session_id="s0")
    assert (dead.status, dead.reason) == ("failed", "its worker stopped during the run")


# --- dedup through the index ---------------------------------------------------------------


class ParaphraseEmbedder(FakeEmbedder):
    """Bag of words that reads "espresso" as "coffee": a paraphrase is close by vector and
    far by text."""

    def _vector(self, text: str) -> list[float]:
        return super()._vector(re.sub("espresso", "coffee", text, flags=re.IGNORECASE))


@pytest.fixture
def embedder(monkeypatch):
    embedder = ParaphraseEmbedder()
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: embedder)
    return embedder


def memory(content: str, *, embedded: bool = True) -> LongTermMemory:
    created = memory_create(
        agent_id="agent-a", content=content, memory_type="fact", actor="consolidation"
    )
    if embedded:
        vectors.embed_pending()
    return created


COFFEE, ESPRESSO = "Ana drinks coffee after lunch", "Ana drinks espresso after lunch"


def test_dedup_finds_a_paraphrase_by_vector(embedder, one_memory_per_message):
    coffee = memory(COFFEE)
    say(ESPRESSO)
    assert text_similarity(COFFEE, ESPRESSO) < 0.8  # the text alone would not merge them

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.created, run.merged) == (0, 1)
    coffee.refresh_from_db()
    assert (coffee.content, coffee.source_count) == (ESPRESSO, 2)
    assert embedder.calls[-1] == [ESPRESSO]  # the extracted item, embedded for the search


def test_without_vectors_dedup_falls_back_to_text_similarity(one_memory_per_message):
    coffee = memory(COFFEE)
    say(ESPRESSO)
    say("Ana drinks coffee after lunch!")

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.created, run.merged) == (1, 1)
    coffee.refresh_from_db()
    assert coffee.source_count == 2
    assert LongTermMemory.objects.filter(content=ESPRESSO).exists()


def test_a_memory_without_its_vector_yet_still_dedups(embedder, one_memory_per_message):
    memory("The office is in Lyon")  # vectors in use
    tea = memory("I prefer green tea in the morning", embedded=False)
    say("I prefer green tea in the mornings.")

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.created, run.merged) == (0, 1)
    tea.refresh_from_db()
    assert tea.source_count == 2


def test_items_of_one_run_merge_into_each_other(embedder, one_memory_per_message):
    memory("The office is in Lyon")
    say(COFFEE)
    say(ESPRESSO)  # close by vector to the memory the first item creates, which has none yet

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.created, run.merged) == (1, 1)
    assert LongTermMemory.objects.get(source_count=2).content == ESPRESSO


def test_a_failing_provider_leaves_dedup_to_the_text(embedder, one_memory_per_message):
    tea = memory("I prefer green tea in the morning")
    say("I prefer green tea in the mornings.")
    embedder.fail_times = 1

    run = consolidate_session(agent_id="agent-a", session_id="s1")

    assert (run.status, run.created, run.merged) == ("done", 0, 1)
    tea.refresh_from_db()
    assert tea.source_count == 2


# --- migrations ----------------------------------------------------------------------------


# Plain SQL for the 0006 schema, through the service's connection (the FTS triggers need its
# SQL functions): memories and the history the backfill reads.
OLD_MEMORIES = """
from django.db import connection
memories = [
    ("by api", [("create", "api", None)]),
    ("by consolidation", [("create", "consolidation", None)]),
    ("reworded in the UI", [("create", "consolidation", None), ("update", "ui:ann", "old")]),
    ("expiry set in the admin", [("create", "cleanup", None), ("update", "admin:bob", None)]),
]
with connection.cursor() as c:
    for content, history in memories:
        c.execute(
            "INSERT INTO long_term_memories (content, memory_type) VALUES (%s, 'fact')", [content]
        )
        for action, actor, old in history:
            c.execute(
                "INSERT INTO long_term_memory_history (memory_id, agent_id, action, actor, "
                "old_content) SELECT MAX(id), 'default', %s, %s, %s FROM long_term_memories",
                [action, actor, old],
            )
"""
CURATED = """
from memory.models import LongTermMemory
print(sorted(LongTermMemory.objects.filter(curated=True).values_list("content", flat=True)))
"""


@pytest.mark.slow
def test_the_migration_marks_what_people_wrote_as_curated(tmp_path):
    manage(tmp_path, "migrate", "memory", "0006", "--no-input")
    manage(tmp_path, "shell", "-c", OLD_MEMORIES)

    manage(tmp_path, "migrate", "--no-input")

    curated = last_line(manage(tmp_path, "shell", "-c", CURATED))
    assert curated == "['by api', 'reworded in the UI']"


SOURCES = """
from memory.models import MemorySource
print(sorted(MemorySource.objects.values_list("memory__content", "written_by", "message_id")))
"""
FOUND = """
from memory import index
from memory.index_schema import MEMORY_TEXT
print(len(index.lexical_search(MEMORY_TEXT, agent_id="default", query="admin", k=5)))
"""


@pytest.mark.slow
def test_the_lifecycle_migration_names_who_wrote_each_memory_and_reverses(tmp_path):
    manage(tmp_path, "migrate", "memory", "0022", "--no-input")
    manage(tmp_path, "shell", "-c", OLD_MEMORIES)

    manage(tmp_path, "migrate", "--no-input")

    assert last_line(manage(tmp_path, "shell", "-c", SOURCES)) == str(
        [("by api", "api", None), ("reworded in the UI", "ui:ann", None)]
    )
    manage(tmp_path, "migrate", "memory", "0022", "--no-input")
    # Added in place, dropped in place: the memories' lexical index still finds them.
    assert last_line(manage(tmp_path, "shell", "-c", FOUND)) == "1"


@pytest.mark.parametrize("migration", ["0007_longtermmemory_curated", "0023_memory_lifecycle"])
def test_the_backfills_name_the_services_own_actors(migration):
    """Migrations 0007 (curated) and 0023 (sources) keep their SQL as literal text: the actors
    they take for the service's own are memory.models' AUTOMATIC_ACTORS, which
    memories.by_a_person reads."""
    backfill = import_module(f"memory.migrations.{migration}").BACKFILL
    named = re.search(r'"?actor"? NOT IN \(([^)]*)\)', backfill)

    assert named is not None
    assert {actor.strip(" '") for actor in named[1].split(",")} == AUTOMATIC_ACTORS
    assert not by_a_person(CONSOLIDATION) and not by_a_person(CLEANUP) and by_a_person("api")


OLD_RUNS = """
from django.db import connection
with connection.cursor() as c:
    c.execute(
        "INSERT INTO main_messages (id, agent_id, session_id, role, content, timestamp) VALUES "
        "(1, 'a', 's1', 'user', 'before the run', '2026-01-01 10:00:00'), "
        "(2, 'a', 's1', 'user', 'after the run', '2026-01-01 12:00:00')"
    )
    c.execute(
        "INSERT INTO consolidation_runs "
        "(agent_id, session_id, trigger, started_at, extractor, skipped_reason) VALUES "
        "('a', 's1', 'session_end', '2026-01-01 11:00:00', 'rules', ''), "
        "('a', 's1', 'session_end', '2026-01-01 11:00:10', '', "
        "'the agent was consolidated less than 30 seconds ago'), "
        "('a', 's2', 'turns', '2026-01-01 11:00:20', 'llm', "
        "'the chat model''s answer was not valid JSON, twice')"
    )
"""
RUNS = """
from memory.models import ConsolidationRun
print([
    (r.session_id, r.status, r.requested_at == r.started_at, r.last_message_id)
    for r in ConsolidationRun.objects.order_by("id")
])
ConsolidationRun.objects.create(agent_id="a", session_id="s3", trigger="session_end",
                                status="deferred")
"""
OLD_REASONS = """
from django.db import connection
with connection.cursor() as c:
    c.execute("SELECT session_id, skipped_reason, started_at IS NOT NULL FROM consolidation_runs")
    print(c.fetchall())
"""


@pytest.mark.slow
def test_the_migration_gives_past_runs_their_status_and_reverses(tmp_path):
    manage(tmp_path, "migrate", "memory", "0007", "--no-input")
    manage(tmp_path, "shell", "-c", OLD_RUNS)

    manage(tmp_path, "migrate", "--no-input")

    assert last_line(manage(tmp_path, "shell", "-c", RUNS)) == str(
        [("s1", "done", True, 1), ("s1", "skipped", True, None), ("s2", "failed", True, None)]
    )
    manage(tmp_path, "migrate", "memory", "0007", "--no-input")
    assert last_line(manage(tmp_path, "shell", "-c", OLD_REASONS)) == str(
        [
            ("s1", "", 1),
            ("s1", "the agent was consolidated less than 30 seconds ago", 1),
            ("s2", "the chat model's answer was not valid JSON, twice", 1),
            ("s3", "deferred", 1),  # the old schema reads an empty reason as "it ran"
        ]
    )


def test_consolidation_reads_what_a_named_assistant_says_about_themselves(db):
    add_message("I have a cat named Oscar.", metadata={"speaker": "Caroline"})
    add_message(  # a person: LoCoMo
        "I have two kids who love camping.", role="assistant", metadata={"speaker": "Melanie"}
    )
    add_message("I am a nurse.", agent_id="a2")
    add_message(  # the AI itself: not a fact about anyone
        "I am an AI model.", role="assistant", agent_id="a2"
    )

    consolidate_session(agent_id="a1", session_id="s1")
    consolidate_session(agent_id="a2", session_id="s1")

    assert sorted(
        LongTermMemory.objects.filter(agent_id="a1").values_list("content", flat=True)
    ) == [
        "Caroline: I have a cat named Oscar.",
        "Melanie: I have two kids who love camping.",
    ]
    assert list(LongTermMemory.objects.filter(agent_id="a2").values_list("content", flat=True)) == [
        "I am a nurse."
    ]
