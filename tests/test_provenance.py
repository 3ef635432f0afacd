"""Where each long-term memory came from: the messages consolidation found it in (the rules'
and the chat model's), a merge's messages, the people who wrote it; `valid_from`; shown by
the API, MCP, the context's items, the dashboard and the admin."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from memory.auth import api_key_create
from memory.consolidation import CONSOLIDATION
from memory.dates import day_label
from memory.memories import memory_create, memory_update
from memory.messages import messages_delete
from memory.models import ConsolidationRun, LongTermMemory, MainMessage, ShortTermMemory
from memory.views import message_url
from tests.factories import add_message, consolidate_session
from tests.test_i18n import ZH
from tests.test_mcp import rpc, send

pytestmark = pytest.mark.django_db

MARCH = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def said(content: str, *, role: str = "user", session_id: str = "s1", **fields) -> MainMessage:
    return add_message(content, role=role, session_id=session_id, summarize=False, **fields)


def sources(memory: LongTermMemory) -> list[int | str]:
    """The memory's sources as stored: message ids, then people, in the listed order."""
    return [s.message_id or s.written_by for s in memory.source_list()]


def memory_saying(content: str) -> LongTermMemory:
    return LongTermMemory.objects.get(content=content)


def let_the_agent_run_again() -> None:
    """Past the agent's 30-second window, so the next run starts at once."""
    ConsolidationRun.objects.update(started_at=timezone.now() - timedelta(seconds=31))


# --- the rules: each statement's messages ----------------------------------------------------


def test_it_gives_each_extracted_memory_the_messages_it_came_from():
    tabs = said("I prefer tabs over spaces.", timestamp=MARCH)
    said("Noted, tabs it is.", role="assistant", timestamp=MARCH + timedelta(minutes=1))
    name = said("我叫小王，我是后端工程师。", timestamp=MARCH + timedelta(minutes=2))
    said("Hello there", timestamp=MARCH + timedelta(minutes=3))

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (run.status, run.created) == ("done", 3)
    for content, message in [
        ("I prefer tabs over spaces.", tabs),
        ("我叫小王", name),
        ("我是后端工程师。", name),
    ]:
        memory = memory_saying(content)
        assert sources(memory) == [message.pk]
        assert memory.valid_from == message.timestamp


def test_two_messages_saying_the_same_in_one_run_are_both_sources():
    first = said("I prefer tabs over spaces.", timestamp=MARCH)
    again = said("Thanks! I prefer tabs over spaces.", timestamp=MARCH + timedelta(days=1))

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (run.created, run.merged) == (1, 0)
    memory = memory_saying("I prefer tabs over spaces.")
    assert sources(memory) == [first.pk, again.pk]
    assert memory.valid_from == MARCH


def test_a_merge_adds_its_messages_once_and_an_older_one_moves_valid_from_back():
    march = said("I prefer tabs over spaces.", timestamp=MARCH)
    consolidate_session(agent_id="a1", session_id="s1")
    let_the_agent_run_again()
    # A conversation imported from the past says it too.
    earlier = said(
        "I prefer tabs over spaces.", session_id="s0", timestamp=MARCH.replace(year=2025)
    )

    run = consolidate_session(agent_id="a1", session_id="s0")

    assert run.merged == 1
    memory = memory_saying("I prefer tabs over spaces.")
    assert sources(memory) == [earlier.pk, march.pk]
    assert memory.valid_from == earlier.timestamp
    assert memory.source_count == 2
    # The same messages confirming it again add no second row for either.
    memory_update(
        memory, actor=CONSOLIDATION, source_count=3, source_messages=[march.pk, earlier.pk]
    )
    assert sources(memory) == [earlier.pk, march.pk]


def test_a_newer_merge_leaves_valid_from_where_it_was():
    said("I prefer tabs over spaces.", timestamp=MARCH)
    consolidate_session(agent_id="a1", session_id="s1")
    let_the_agent_run_again()
    said("I prefer tabs over spaces.", session_id="s2", timestamp=MARCH + timedelta(days=30))

    consolidate_session(agent_id="a1", session_id="s2")

    memory = memory_saying("I prefer tabs over spaces.")
    assert len(sources(memory)) == 2 and memory.valid_from == MARCH


def test_a_deleted_source_message_leaves_the_memory_its_other_sources(api_for):
    first = said("I prefer tabs over spaces.", timestamp=MARCH)
    consolidate_session(agent_id="a1", session_id="s1")
    let_the_agent_run_again()
    second = said("I prefer tabs over spaces.", session_id="s2", timestamp=MARCH + timedelta(1))
    consolidate_session(agent_id="a1", session_id="s2")

    messages_delete(messages=MainMessage.objects.filter(pk=first.pk))

    memory = memory_saying("I prefer tabs over spaces.")
    assert sources(memory) == [second.pk]
    body = api_for("a1").get(f"/memories/{memory.pk}").json()
    assert [s["message_id"] for s in body["sources"]] == [second.pk]


# --- the chat model: the turns of the summaries it names --------------------------------------


@pytest.fixture
def two_turns() -> dict[str, MainMessage]:
    """A turn no summary of the run covers, then two summarised turns."""
    turns = {
        "u0": said("Hi."),
        "a0": said("Hello! How can I help?", role="assistant"),
        "u1": said("I like green tea."),
        "a1": said("Noted: green tea.", role="assistant"),
        "u2": said("We deploy on Fridays."),
        "a2": said("Fridays it is.", role="assistant"),
    }
    for reply, text in (("a1", "用户喜欢绿茶"), ("a2", "团队周五部署")):
        ShortTermMemory.objects.create(
            agent_id="a1", session_id="s1", content=text, reply_id=turns[reply].pk
        )
    return turns


def answer(*items: dict) -> str:
    return json.dumps({"memories": list(items)}, ensure_ascii=False)


def ids(turns: dict[str, MainMessage], *names: str) -> list[int]:
    return [turns[name].pk for name in names]


def test_the_chat_model_names_the_summaries_and_each_memory_gets_their_turns(chat, two_turns):
    answers, prompts = chat
    answers.append(
        answer(
            {"type": "preference", "content": "喜欢绿茶", "from": [1]},
            {"type": "decision", "content": "周五部署", "from": [2]},
            {"type": "fact", "content": "用户有一个团队", "from": [2, 1]},
        )
    )

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (run.extractor, run.created) == ("llm", 3)
    assert "1. 用户喜欢绿茶\n2. 团队周五部署" in prompts[0] and '"from"' in prompts[0]
    assert sources(memory_saying("喜欢绿茶")) == ids(two_turns, "u1", "a1")
    assert sources(memory_saying("周五部署")) == ids(two_turns, "u2", "a2")
    assert sources(memory_saying("用户有一个团队")) == ids(two_turns, "u1", "a1", "u2", "a2")
    assert memory_saying("周五部署").valid_from == two_turns["u2"].timestamp


@pytest.mark.parametrize(
    "named",
    [
        {},
        {"from": [3]},
        {"from": [0]},
        {"from": "1"},
        {"from": [True]},
        {"from": [1, 9]},
        {"from": []},
    ],
    ids=["missing", "too high", "zero", "text", "boolean", "one bad", "empty"],
)
def test_summaries_named_badly_give_the_memory_every_summarised_turn(chat, two_turns, named):
    answers, _ = chat
    answers.append(answer({"type": "preference", "content": "喜欢绿茶", **named}))

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (run.extractor, run.created, run.reason) == ("llm", 1, "")
    assert sources(memory_saying("喜欢绿茶")) == ids(two_turns, "u1", "a1", "u2", "a2")


def test_summaries_without_their_reply_give_the_memory_the_runs_messages(chat):
    answers, _ = chat
    asked = said("I like green tea.")
    reply = said("Noted.", role="assistant")
    said("a tool result", role="tool")
    ShortTermMemory.objects.create(agent_id="a1", session_id="s1", content="用户喜欢绿茶")
    answers.append(answer({"type": "preference", "content": "喜欢绿茶", "from": [1]}))

    consolidate_session(agent_id="a1", session_id="s1")

    assert sources(memory_saying("喜欢绿茶")) == [asked.pk, reply.pk]


# --- people --------------------------------------------------------------------------------


def test_a_person_writing_or_rewording_a_memory_is_its_source_once(api):
    created = api.post("/memories", {"content": "Prefers dark mode", "memory_type": "preference"})
    body = created.json()
    assert body["sources"] == [{"written_by": "api"}] and body["valid_from"] is None

    api.patch(f"/memories/{body['id']}", {"content": "Prefers dark mode everywhere"})
    memory = LongTermMemory.objects.get(pk=body["id"])
    memory_update(memory, actor="ui:ann", confidence=0.9)  # not the text: not a source
    memory_update(memory, actor="ui:ann", content="Prefers dark mode, always")

    assert sources(memory) == ["api", "ui:ann"]
    assert api.get(f"/memories/{memory.pk}").json()["sources"] == [
        {"written_by": "api"},
        {"written_by": "ui:ann"},
    ]


def test_a_person_rewording_a_consolidated_memory_joins_its_messages(api_for):
    message = said("I prefer tabs over spaces.", timestamp=MARCH)
    consolidate_session(agent_id="a1", session_id="s1")
    memory = memory_saying("I prefer tabs over spaces.")
    api = api_for("a1")

    reworded = api.patch(f"/memories/{memory.pk}", {"content": "Prefers tabs"}).json()

    assert reworded["sources"] == [
        {
            "message_id": message.pk,
            "session_id": "s1",
            "role": "user",
            "timestamp": "2026-03-02T09:30:00Z",
        },
        {"written_by": "api"},
    ]
    assert reworded["valid_from"] == "2026-03-02T09:30:00Z"


def test_the_admin_is_a_person_who_writes_memories(admin_client):
    response = admin_client.post(
        reverse("admin:memory_longtermmemory_add"),
        {
            "agent_id": "a1",
            "content": "Works in Lisbon",
            "memory_type": "fact",
            "confidence": "0.5",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert sources(memory_saying("Works in Lisbon")) == ["admin:admin"]


# --- the API and MCP -----------------------------------------------------------------------


def _memories_with_sources(count: int) -> None:
    for i in range(count):
        message = said(f"note {i}", session_id=f"s{i}", timestamp=MARCH + timedelta(minutes=i))
        memory_create(
            agent_id="a1",
            content=f"memory {i} about tea",
            memory_type="fact",
            actor=CONSOLIDATION,
            source_messages=[message.pk],
        )
    memory_create(agent_id="a1", content="tea by a person", memory_type="fact", actor="api")


@pytest.mark.parametrize("query", [{}, {"q": "tea"}], ids=["newest first", "text search"])
def test_the_memory_list_reads_every_source_in_one_query(
    api_for, django_assert_max_num_queries, query
):
    api = api_for("a1")
    _memories_with_sources(2)
    with CaptureQueriesContext(connection) as few:
        assert len(api.get("/memories", **query).json()["items"]) == 3
    _memories_with_sources(8)

    with django_assert_max_num_queries(len(few.captured_queries)):
        page = api.get("/memories", **query).json()["items"]

    assert len(page) == 12
    for memory in page:
        if memory["content"] == "tea by a person":
            assert memory["sources"] == [{"written_by": "api"}]
        else:
            (source,) = memory["sources"]
            stored = MainMessage.objects.get(pk=source["message_id"])
            assert (source["session_id"], source["role"]) == (stored.session_id, "user")
            assert memory["valid_from"] == source["timestamp"]


def test_mcp_lists_memories_with_their_sources_as_the_api_does(client, api_for):
    _memories_with_sources(2)
    key = api_key_create(agent_id="a1")[1]

    answered = send(client, rpc("tools/call", {"name": "list_memories", "arguments": {}}), key)

    listed = answered.json()["result"]["structuredContent"]["memories"]
    by_api = api_for("a1").get("/memories").json()["items"]
    # The same schema (the times of the memories' rows are written with other fractions).
    assert [(m["id"], m["sources"]) for m in listed] == [(m["id"], m["sources"]) for m in by_api]
    assert [len(m["sources"]) for m in listed] == [1, 1, 1]
    assert listed[1]["sources"][0]["session_id"] == "s1"


# --- the context's items -------------------------------------------------------------------


def test_the_contexts_memories_carry_their_source_ids_outside_the_prompt(api_for):
    # Messages recall would not bring (a memory a recalled message says is left out).
    standup, lunch = said("The standup is at nine."), said("Lunch is at noon.", session_id="s2")
    for content, message in [
        ("I prefer tabs over spaces.", standup),
        ("I use Neovim for everything.", lunch),
    ]:
        memory_create(
            agent_id="a1",
            content=content,
            memory_type="preference",
            actor=CONSOLIDATION,
            source_messages=[message.pk],
        )

    with CaptureQueriesContext(connection) as queries:
        built = api_for("a1").post(
            "/sessions/s3/context", {"query": "do I prefer tabs or use Neovim?"}
        )

    layer = built.json()["explanation"]["layers"]["long_term"]
    assert {item["content"]: item["details"]["source_ids"] for item in layer["items"]} == {
        "I prefer tabs over spaces.": [standup.pk],
        "I use Neovim for everything.": [lunch.pk],
    }
    read = [q["sql"] for q in queries.captured_queries if "long_term_memory_sources" in q["sql"]]
    assert len(read) == 1
    system = built.json()["messages"][0]["content"]
    tabs = LongTermMemory.objects.get(content="I prefer tabs over spaces.")
    assert f"- [preference, since {day_label(tabs.said_at.date())}] I prefer tabs" in system
    section = system.split("Long-term memory")[1].split("\n\n")[0]
    assert not re.search(rf"\b({standup.pk}|{lunch.pk})\b", section)


# --- the dashboard and the admin -----------------------------------------------------------


def _merged_and_reworded() -> tuple[LongTermMemory, MainMessage, MainMessage]:
    first = said("I prefer tabs over spaces.", timestamp=MARCH)
    consolidate_session(agent_id="a1", session_id="s1")
    let_the_agent_run_again()
    second = said("我更喜欢用 tab 缩进。I prefer tabs over spaces.", session_id="s2")
    consolidate_session(agent_id="a1", session_id="s2")
    memory = memory_saying("I prefer tabs over spaces.")
    memory_update(memory, actor="ui:ann", content="Prefers tabs over spaces")
    return memory, first, second


def test_the_memory_page_links_each_source_message_and_names_the_writer(admin_client):
    memory, first, second = _merged_and_reworded()

    page = admin_client.get(reverse("memory", args=[memory.pk]))
    chinese = admin_client.get(reverse("memory", args=[memory.pk]), **ZH).content.decode()

    html = page.content.decode()
    assert [s.url for s in page.context["sources"] if s.url] == [
        message_url("a1", "s1", first.pk),
        message_url("a1", "s2", second.pk),
    ]
    for message in (first, second):
        url = message_url("a1", message.session_id, message.pk)
        assert f'href="{url}"' in html and f"message #{message.pk}" in html
    assert html.index(f"message #{first.pk}") < html.index(f"message #{second.pk}")
    assert "我更喜欢用 tab 缩进。" in html  # the message's words
    assert "written by ann (dashboard)" in html and "first said" in html
    assert (
        "来源" in chinese and "由 ann（仪表盘） 撰写" in chinese and f"消息 #{first.pk}" in chinese
    )


def test_a_memory_without_sources_says_so(admin_client):
    memory = LongTermMemory.objects.create(agent_id="a1", content="old", memory_type="fact")

    html = admin_client.get(reverse("memory", args=[memory.pk])).content.decode()

    assert "No sources recorded" in html and "first said" not in html


def test_the_admin_shows_the_sources_read_only(admin_client):
    memory, first, _ = _merged_and_reworded()

    page = admin_client.get(reverse("admin:memory_longtermmemory_change", args=[memory.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    url = reverse("admin:memory_mainmessage_change", args=[first.pk])
    assert f'<li><a href="{url}">message #{first.pk}</a> · User · session s1 · ' in html
    assert "<li>written by ann (dashboard)</li>" in html
    assert 'name="sources' not in html  # read-only: nothing to change
