"""Editing and deleting stored messages: the flows `message_update` and `messages_delete`
(the admin calls them; tests/test_admin.py drives them through its pages, and
tests/test_fault_injection.py through an outage)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django_tasks_db.models import DBTaskResult

from memory import index, scheduling, vectors
from memory.messages import message_update, messages_delete
from memory.models import MainMessage
from memory.validation import InvalidInput
from subagents.models import SubagentMessage
from tests.factories import add_message

pytestmark = pytest.mark.django_db


def found(query: str) -> set[int]:
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=query, k=10)
    return {hit.id for hit in hits}


def nearest(embedder: Any, text: str) -> set[int]:
    probe = embedder.embed([text])[0]
    return {
        hit.id for hit in index.knn(index.MESSAGE_VECTORS, agent_id="a1", embedding=probe, k=50)
    }


class Writes:
    """The statements that write, run while installed (`connection.execute_wrapper`)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute: Any, sql: str, *args: Any) -> Any:
        if sql.split()[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            self.statements.append(sql)
        return execute(sql, *args)


@pytest.fixture
def aquarium() -> list[MainMessage]:
    """A question, its answer, and two messages after them. A message's lexical index row
    holds the two before it (`ctx`): the fourth's does not hold the question."""
    return [
        add_message("Did you visit the aquarium yesterday?"),
        add_message("Yes, it was wonderful.", role="assistant"),
        add_message("Great to hear."),
        add_message("We should go again.", role="assistant"),
    ]


# --- message_update --------------------------------------------------------------------------


def test_it_recounts_a_new_texts_tokens_reindexes_the_replies_after_it_and_queues_a_vector(
    settings, fake_embedder, aquarium
):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    question, answer, _, fourth = aquarium
    MainMessage.objects.filter(pk=question.pk).update(has_embedding=True)
    DBTaskResult.objects.all().delete()  # the adds' own runs

    message_update(question, content="我们昨天去了天文馆吗？")

    question.refresh_from_db()
    assert (question.content, question.token_count, question.has_embedding) == (
        "我们昨天去了天文馆吗？",
        16,  # 10 CJK characters x 1.5 + 1 punctuation mark / 4, rounded up
        False,
    )
    assert [t.task_path for t in DBTaskResult.objects.all()] == [scheduling.EMBED_PENDING]
    assert found("aquarium") == set()
    assert {question.pk, answer.pk} <= found("天文馆")
    assert fourth.pk not in found("天文馆")


def test_a_new_speaker_is_indexed_and_a_new_type_only_waits_for_its_vector(aquarium):
    question, answer, *_ = aquarium
    MainMessage.objects.filter(pk__in=[question.pk, answer.pk]).update(has_embedding=True)

    message_update(question, metadata={"speaker": "Melanie"})
    message_update(answer, msg_type="decision")

    assert found("Melanie") == {question.pk, answer.pk, aquarium[2].pk}  # and through ctx
    stored = MainMessage.objects.in_bulk([question.pk, answer.pk])
    assert stored[question.pk].has_embedding is stored[answer.pk].has_embedding is False
    assert stored[answer.pk].msg_type == "decision"
    assert stored[answer.pk].token_count == answer.token_count


def test_it_writes_only_what_changed(sql, aquarium):
    """A timestamp the database set is never written back from Python, which would change
    its text (milliseconds against microseconds on SQLite) and its order among its peers."""
    question = aquarium[0]
    (before,) = sql(
        "SELECT CAST(timestamp AS TEXT) FROM main_messages WHERE id = %s", [question.pk]
    )
    writes = Writes()

    with connection.execute_wrapper(writes):
        message_update(question, content="Did you visit the zoo yesterday?")

    updates = [s for s in writes.statements if s.startswith('UPDATE "main_messages"')]
    assert len(updates) == 1 and '"timestamp"' not in updates[0], updates
    assert sql(
        "SELECT CAST(timestamp AS TEXT) FROM main_messages WHERE id = %s", [question.pk]
    ) == [before]


def test_an_edit_that_changes_nothing_writes_nothing(aquarium):
    question = aquarium[0]
    writes = Writes()

    with connection.execute_wrapper(writes):
        message_update(question, content=question.content, msg_type="normal", metadata=None)

    assert writes.statements == []


BAD_EDITS = [
    pytest.param({"role": "assistant"}, "unknown fields: role", id="role-is-the-record"),
    pytest.param({"session_id": "s2"}, "unknown fields: session_id", id="session-is-the-record"),
    pytest.param({"content": "   "}, "content", id="content-blank"),
    pytest.param({"content": "x\x00"}, "content", id="content-nul"),
    pytest.param({"msg_type": "gossip"}, "msg_type must be one of", id="type-unknown"),
    pytest.param({"metadata": [1, 2]}, "metadata must be a JSON object", id="metadata-list"),
    pytest.param({"metadata": {"x": float("nan")}}, "numbers must be finite", id="metadata-nan"),
    pytest.param(
        {"metadata": {"subagent": {"parent_msg_id": 1, "agent_name": "x"}}},
        "metadata.subagent is the service's record of a sub-agent run",
        id="metadata-forged-run",
    ),
]


@pytest.mark.parametrize(("fields", "error"), BAD_EDITS)
def test_it_refuses_a_bad_edit_before_writing_anything(aquarium, fields, error):
    question = aquarium[0]
    writes = Writes()

    with connection.execute_wrapper(writes), pytest.raises(InvalidInput, match=error):
        message_update(question, **{"content": "Did you visit the zoo yesterday?", **fields})

    assert writes.statements == []
    assert MainMessage.objects.get(pk=question.pk).content == aquarium[0].content


def test_a_results_run_record_may_stay_but_never_change_or_go(conversation):
    result = conversation.result
    run = dict(result.metadata["subagent"])

    for metadata in ({"subagent": {**run, "agent_name": "someone-else"}}, {"speaker": "bot"}):
        with pytest.raises(InvalidInput, match="cannot be added, changed or removed"):
            message_update(result, metadata=metadata)
    message_update(result, metadata={"subagent": run, "note": 1})

    result.refresh_from_db()
    assert result.metadata == {"subagent": run, "note": 1}


# --- messages_delete -------------------------------------------------------------------------


def test_deleting_messages_takes_their_text_vectors_and_transcripts_with_them(
    fake_embedder, aquarium, conversation
):
    question, answer, third, fourth = aquarium
    vectors.embed_pending()
    assert question.pk in nearest(fake_embedder, "aquarium")
    assert (found("aquarium"), found("hear")) == (
        {question.pk, answer.pk, third.pk},
        {third.pk, fourth.pk},
    )
    assert SubagentMessage.objects.filter(parent_msg=conversation.ask).exists()

    deleted = messages_delete(
        messages=MainMessage.objects.filter(pk__in=[question.pk, third.pk, conversation.ask.pk])
    )

    assert deleted == 3
    assert set(MainMessage.objects.filter(agent_id="a1").values_list("pk", flat=True)) == {
        answer.pk,
        fourth.pk,
    }
    # Their text is gone from the ctx of the messages after them too.
    assert found("aquarium") == found("hear") == set()
    assert found("wonderful") == {answer.pk, fourth.pk}
    assert question.pk not in nearest(fake_embedder, "aquarium")
    assert not SubagentMessage.objects.filter(parent_msg_id=conversation.ask.pk).exists()
