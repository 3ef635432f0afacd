"""Consolidation into long-term memory: curated text, deferral inside the 30 s window,
incremental runs, and dedup through the index."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.maintenance import consolidate_session
from memory.messages import message_add
from memory.models import ConsolidationRun, LongTermMemory, LongTermMemoryHistory
from tests.helpers import last_line, manage

pytestmark = pytest.mark.django_db


def say(content: str, role: str = "user", *, session: str = "s1", agent: str = "agent-a"):
    return message_add(agent_id=agent, session_id=session, role=role, content=content)


# --- curated text --------------------------------------------------------------------------


def test_a_curated_memorys_text_survives_a_merge(api):
    created = api.post(
        "/memories",
        {"content": "I prefer green tea in the morning", "memory_type": "preference"},
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
    }


def test_an_uncurated_memory_takes_the_newer_wording():
    say("I prefer green tea in the morning")
    consolidate_session(agent_id="agent-a", session_id="s1", trigger="session_end")
    memory = LongTermMemory.objects.get()
    assert memory.curated is False
    say("I prefer green tea in the mornings.", session="s2")
    ConsolidationRun.objects.update(started_at=timezone.now() - timedelta(seconds=31))

    consolidate_session(agent_id="agent-a", session_id="s2", trigger="session_end")

    memory.refresh_from_db()
    assert (memory.content, memory.source_count) == ("I prefer green tea in the mornings.", 2)


def test_a_person_rewording_a_consolidated_memory_curates_it(api):
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


def test_the_migration_marks_what_people_wrote_as_curated(tmp_path):
    manage(tmp_path, "migrate", "memory", "0006", "--no-input")
    manage(tmp_path, "shell", "-c", OLD_MEMORIES)

    manage(tmp_path, "migrate", "--no-input")

    curated = last_line(manage(tmp_path, "shell", "-c", CURATED))
    assert curated == "['by api', 'reworded in the UI']"
    manage(tmp_path, "migrate", "memory", "0006", "--no-input")  # and back
