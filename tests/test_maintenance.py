"""Turn summaries, consolidation into long-term memory (dedup, 30 s window), cleanup, history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory import cleanup, llm
from memory.context import context_build
from memory.extraction import offline_extract
from memory.models import ConsolidationRun, LongTermMemory, LongTermMemoryHistory, ShortTermMemory
from memory.summaries import summarize_turns
from memory.text import text_similarity
from tests.factories import add_message, consolidate_session

pytestmark = pytest.mark.django_db


def test_the_offline_summary_keeps_the_first_sentence_of_each_side():
    add_message("我喜欢喝绿茶。你呢？")
    reply = add_message("I like black tea. It is strong.", role="assistant")

    (summary,) = summarize_turns([reply])

    assert summary.content == "user: 我喜欢喝绿茶。 / assistant: I like black tea."
    assert (summary.agent_id, summary.session_id, summary.source_count) == ("a1", "s1", 2)


def test_the_chat_model_writes_the_summary_with_the_designs_prompt(chat):
    answers, prompts = chat
    answers.append("用户喜欢绿茶。")
    add_message("我喜欢喝绿茶")
    (summary,) = summarize_turns([add_message("好的，记住了", role="assistant")])
    assert summary.content == "用户喜欢绿茶。"
    assert prompts[0].startswith("请用一句话总结本轮对话的关键信息，不超过 50 字：")
    assert "user: 我喜欢喝绿茶" in prompts[0]


def test_a_session_keeps_its_newest_ten_summaries():
    for i in range(12):
        add_message(f"question {i}")
        summarize_turns([add_message(f"answer {i}", role="assistant")])
    kept = list(ShortTermMemory.objects.order_by("id").values_list("content", flat=True))
    assert len(kept) == 10
    assert kept[0].startswith("user: question 2")


@pytest.mark.django_db(transaction=True)
def test_each_assistant_reply_is_summarized_and_session_end_consolidates(api):
    api.post("/sessions/s1/messages", {"role": "user", "content": "我喜欢喝绿茶，不喜欢咖啡。"})
    api.post("/sessions/s1/messages", {"role": "assistant", "content": "好的，我记住了。"})
    api.post(
        "/sessions/s1/messages", {"role": "user", "content": "We decided to deploy on Fridays."}
    )
    api.post("/sessions/s1/messages", {"role": "assistant", "content": "Noted."})
    assert ShortTermMemory.objects.count() == 2  # one per assistant reply

    response = api.post("/sessions/s1/end")

    assert response.status_code == 202
    memories = {m.memory_type: m for m in LongTermMemory.objects.filter(agent_id="agent-a")}
    assert memories["preference"].content == "我喜欢喝绿茶，不喜欢咖啡。"
    assert memories["decision"].content == "We decided to deploy on Fridays."
    assert {m.source_session for m in memories.values()} == {"s1"}
    run = ConsolidationRun.objects.get()
    assert (run.trigger, run.extractor, run.created, run.merged) == ("session_end", "rules", 2, 0)

    # ...and they are in the next session's context.
    # (Lexically: "喝什么茶" shares no word with the memory, and the context takes no memory
    # that does not match its query; with vectors it would.)
    context = api.post("/sessions/s2/context", {"query": "绿茶还是咖啡？"}).json()
    assert "我喜欢喝绿茶" in context["messages"][0]["content"]


def test_every_twentieth_turn_consolidates(monkeypatch):
    from memory import tasks

    for i in range(20):
        add_message("I prefer short answers." if i == 0 else f"question number {i}")
        reply = add_message(f"answer {i}", role="assistant")
        tasks.summarize_turn_task.call(reply.pk)
        assert ConsolidationRun.objects.count() == (1 if i == 19 else 0)
    assert ConsolidationRun.objects.get().trigger == "turns"
    assert LongTermMemory.objects.get().content == "I prefer short answers."


DB_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


def _summary_tasks() -> list[tuple[str, list[int]]]:
    from django_tasks_db.models import DBTaskResult

    from memory import scheduling

    rows = DBTaskResult.objects.filter(task_path=scheduling.SUMMARIZE_TURN)
    return [(t.status, t.args_kwargs["args"]) for t in rows.order_by("enqueued_at")]


def test_replies_stored_while_a_summary_task_waits_join_it(settings):
    from django_tasks_db.models import DBTaskResult

    from memory import tasks

    settings.TASKS = DB_TASKS
    replies = []
    for i in range(3):
        add_message(f"question {i}")
        replies.append(add_message(f"answer {i}", role="assistant").pk)
    assert _summary_tasks() == [("READY", replies)]

    # Once the worker has claimed it, the next reply waits in a task of its own.
    DBTaskResult.objects.update(status="RUNNING")
    add_message("question 3")
    fourth = add_message("answer 3", role="assistant").pk
    assert _summary_tasks() == [("RUNNING", replies), ("READY", [fourth])]

    tasks.summarize_turn_task.call(*replies)
    tasks.summarize_turn_task.call(fourth)
    summaries = ShortTermMemory.objects.order_by("id").values_list("reply_id", "content")
    assert list(summaries) == [
        (reply, f"user: question {i} / assistant: answer {i}")
        for i, reply in enumerate([*replies, fourth])
    ]


def test_a_waiting_summary_task_takes_at_most_50_replies(settings):
    from django.db import transaction

    from memory import scheduling

    settings.TASKS = DB_TASKS
    for reply_id in range(1, 52):
        with transaction.atomic():
            scheduling.schedule_summaries([reply_id])
    assert _summary_tasks() == [("READY", list(range(1, 51))), ("READY", [51])]


def test_one_task_for_a_burst_asks_for_one_consolidation_per_session():
    from memory import tasks

    replies = []
    for session in ("s1", "s2"):
        for i in range(25 if session == "s1" else 5):
            add_message(f"question {i}", session_id=session)
            replies.append(add_message(f"answer {i}", role="assistant", session_id=session))
    # (Tests run tasks only when they say so: none ran yet.)
    tasks.summarize_turn_task.call(*(reply.pk for reply in replies))

    # s1 reached 20 turns: one run up to its newest reply; s2 (5 turns) waits for more.
    runs = ConsolidationRun.objects.values_list("session_id", "trigger", "last_message_id")
    assert list(runs) == [("s1", "turns", replies[24].pk)]
    kept = ShortTermMemory.objects.values_list("session_id", "reply_id").order_by("id")
    assert list(kept) == [(r.session_id, r.pk) for r in replies[15:25] + replies[25:]]


def test_a_similar_memory_is_updated_not_duplicated_and_its_old_text_kept():
    original = LongTermMemory.objects.create(
        agent_id="a1",
        content="I prefer green tea in the morning",
        memory_type="preference",
        confidence=0.5,
    )
    LongTermMemory.objects.create(
        agent_id="a2", content="I prefer green tea in the morning!", memory_type="preference"
    )
    add_message("I prefer green tea in the mornings.")  # > 0.8 similar: an update
    add_message("I prefer working late at night.")  # a new memory

    run = consolidate_session(agent_id="a1", session_id="s1", trigger="session_end")

    assert (run.created, run.merged) == (1, 1)
    original.refresh_from_db()
    assert original.content == "I prefer green tea in the mornings."
    assert (original.source_count, original.confidence) == (2, pytest.approx(0.6))
    merge = LongTermMemoryHistory.objects.get(memory_id=original.pk, action="merge")
    assert merge.old_content == "I prefer green tea in the morning"
    assert merge.actor == "consolidation"
    assert LongTermMemory.objects.filter(agent_id="a1").count() == 2
    assert LongTermMemory.objects.get(agent_id="a2").source_count == 1  # another agent's: untouched


def test_consolidation_of_an_agent_within_30_seconds_is_deferred_not_dropped():
    from memory import tasks

    add_message("I like jazz.")
    add_message("We decided to deploy on Fridays.", session_id="s2")
    add_message("I like jazz.", agent_id="a2")
    first = consolidate_session(agent_id="a1", session_id="s1", trigger="session_end")
    second = consolidate_session(agent_id="a1", session_id="s2", trigger="session_end")
    other_agent = consolidate_session(agent_id="a2", session_id="s1", trigger="session_end")

    assert (first.status, first.created) == ("done", 1)
    assert (second.status, second.run_after) == (
        "deferred",
        first.started_at + timedelta(seconds=30),
    )
    assert (other_agent.status, other_agent.created) == ("done", 1)
    assert LongTermMemory.objects.filter(agent_id="a1").count() == 1

    ConsolidationRun.objects.filter(pk=first.pk).update(
        started_at=timezone.now() - timedelta(seconds=31)
    )
    tasks.consolidation_task.call(second.pk)  # what the worker does at run_after
    second.refresh_from_db()
    assert (second.status, second.created) == ("done", 1)
    assert LongTermMemory.objects.filter(agent_id="a1").count() == 2


def test_the_chat_model_extracts_typed_memories_and_malformed_json_is_retried_once(chat):
    answers, prompts = chat
    ShortTermMemory.objects.create(
        agent_id="a1", session_id="s1", content="用户说他叫小明，喜欢爬山"
    )
    answers += [
        "Sure! Here you go: not json",
        '```json\n{"memories": [{"type": "fact", "content": "用户叫小明"}, '
        '{"type": "preference", "content": " 喜欢爬山 "}, {"type": "gossip", "content": "no"}]}\n```',
    ]

    run = consolidate_session(agent_id="a1", session_id="s1", trigger="session_end")

    assert len(prompts) == 2 and "用户说他叫小明，喜欢爬山" in prompts[0]
    assert (run.status, run.extractor, run.created, run.reason) == ("done", "llm", 2, "")
    assert sorted(LongTermMemory.objects.values_list("memory_type", "content")) == [
        ("fact", "用户叫小明"),
        ("preference", "喜欢爬山"),
    ]


def test_twice_malformed_answers_leave_the_extraction_to_the_rules_and_say_why(chat):
    answers, _ = chat
    add_message("I prefer green tea.")
    ShortTermMemory.objects.create(agent_id="a1", session_id="s1", content="a summary")
    answers += ["nope", '{"memories": [{"type": "fact"}]}']

    run = consolidate_session(agent_id="a1", session_id="s1", trigger="session_end")

    assert (run.status, run.extractor, run.created) == ("done", "rules", 1)
    assert run.reason == (
        "the chat model's answer was not valid JSON, twice: the rules extracted instead"
    )
    assert LongTermMemory.objects.get().content == "I prefer green tea."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我喜欢喝绿茶。", [("preference", "我喜欢喝绿茶。")]),
        ("请用中文回答", [("preference", "请用中文回答")]),
        ("我们决定用 Django。然后呢？", [("decision", "我们决定用 Django。")]),
        ("这个项目叫 orca", [("project", "这个项目叫 orca")]),
        ("我叫小明，住在北京", [("fact", "我叫小明，住在北京")]),
        (
            "My name is Ana. I love hiking!",
            [("fact", "My name is Ana."), ("preference", "I love hiking!")],
        ),
        ("What's the weather?", []),
    ],
)
def test_the_offline_extractor_reads_cue_phrases(text, expected):
    message = add_message(text)
    assert [(e.memory_type, e.content) for e in offline_extract([message])] == expected


def test_text_similarity_is_a_bigram_dice_coefficient():
    assert text_similarity("I like tea", "i like tea!") == 1.0
    assert text_similarity("我喜欢喝绿茶", "我喜欢喝红茶") == pytest.approx(0.6)
    assert text_similarity("abc", "xyz") == 0.0


def test_beyond_the_cap_the_least_used_memories_are_archived_not_deleted():
    keep = [
        LongTermMemory.objects.create(
            agent_id="a1", content=f"kept {i}", memory_type="fact", access_count=10
        )
        for i in range(2)
    ]
    low = LongTermMemory.objects.create(
        agent_id="a1", content="rarely used", memory_type="fact", confidence=0.2
    )

    assert cleanup.cleanup("a1", cap=2) == 1

    low.refresh_from_db()
    assert low.archived_at is not None
    assert LongTermMemory.objects.count() == 3
    assert LongTermMemoryHistory.objects.get(memory_id=low.pk).action == "archive"
    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)
    assert {i.id for i in context.layers["long_term"].items} == {m.pk for m in keep}


def test_every_change_through_the_api_is_in_the_history(api):
    memory = api.post("/memories", {"content": "likes tea", "memory_type": "preference"}).json()
    api.patch(f"/memories/{memory['id']}", {"content": "likes green tea", "confidence": 0.9})
    api.post(f"/memories/{memory['id']}/expire")

    history = api.get(f"/memories/{memory['id']}/history").json()["items"]

    assert [(h["action"], h["actor"]) for h in history] == [
        ("expire", "api"),
        ("update", "api"),
        ("create", "api"),
    ]
    assert (history[1]["old_content"], history[1]["new_content"]) == (
        "likes tea",
        "likes green tea",
    )
    assert history[1]["changes"] == {"confidence": 0.9}
    assert history[1]["old_values"] == {"confidence": 0.5}  # the value it replaced
    api.delete(f"/memories/{memory['id']}")
    deleted = LongTermMemoryHistory.objects.filter(memory_id=memory["id"], action="delete").get()
    assert deleted.old_content == "likes green tea"


def test_without_a_key_there_is_no_chat_model(settings):
    llm.configured_chat.cache_clear()
    assert llm.configured_chat() is None
