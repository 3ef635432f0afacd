"""context_build: the three layers, the 60% budget, the cut order, identity recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import vectors
from memory.context import WORKING_PAGE, _working_rows, context_build, is_identity_query
from memory.context_items import date_line, header_tokens
from memory.models import LongTermMemory, ShortTermMemory
from memory.tokens import estimate_tokens
from tests.factories import add_message

pytestmark = pytest.mark.django_db

# "Today is Thursday 3 December 2026, 14:05 UTC." and a blank line: 47 characters.
THURSDAY = datetime(2026, 12, 3, 14, 5, tzinfo=UTC)
DATE_LINE = 12


@pytest.fixture
def on_thursday(monkeypatch):
    """Contexts built on THURSDAY, whose date line counts DATE_LINE tokens."""
    monkeypatch.setattr(timezone, "now", lambda: THURSDAY)


def tokens(n: int, word: str = "abcd") -> str:
    """Text the estimator counts as n tokens (4 characters per token)."""
    return (word * n)[: 4 * n]


def summary(content: str, *, session: str = "s1", agent: str = "a1") -> ShortTermMemory:
    return ShortTermMemory.objects.create(agent_id=agent, session_id=session, content=content)


def memory(
    content: str, memory_type: str = "fact", *, agent: str = "a1", **fields
) -> LongTermMemory:
    """Said on THURSDAY unless given: its line's day ("since 3 December 2026") has a fixed
    length."""
    fields.setdefault("valid_from", THURSDAY)
    return LongTermMemory.objects.create(
        agent_id=agent, content=content, memory_type=memory_type, **fields
    )


def test_the_budget_is_60_percent_of_the_window_split_50_30_20(on_thursday):
    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=1000)
    assert context.budget == 600
    assert {name: layer.share for name, layer in context.layers.items()} == {
        "working": 300,
        "short_term": 180,
        "long_term": 120,
        "recall": 120,  # what long-term memory left of their common 20%
    }
    # Nothing to send: all of the budget was free for recall, but the date line's room (sent
    # with a system message, none here).
    assert context.layers["recall"].budget == 600 - DATE_LINE
    assert context.messages == [] and context.cuts == [] and context.used == 0
    assert context.date_line is None
    assert header_tokens("Today is Thursday 3 December 2026, 14:05 UTC.") == DATE_LINE


def test_working_memory_is_the_newest_messages_that_fit_oldest_first():
    sent = [add_message(tokens(40), role="user" if i % 2 else "assistant") for i in range(10)]
    add_message("another session", session_id="s2")

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=1000)

    working = context.layers["working"]
    assert [item.id for item in working.items] == [m.pk for m in sent[3:]]  # 7 x 40 <= 300
    assert working.used == 280
    assert [m["role"] for m in context.messages[1:]] == [m.role for m in sent[3:]]
    # The three older messages are recalled, with their date and speaker, not repeated.
    recall = context.layers["recall"]
    assert sorted(item.id for item in recall.items) == [m.pk for m in sent[:3]]
    assert context.messages[0]["role"] == "system"
    assert context.messages[0]["content"].count(tokens(40)) == 3


def test_working_memory_reads_a_long_session_a_page_at_a_time():
    start = datetime(2026, 12, 1, tzinfo=UTC)
    sent = [
        add_message(tokens(10), summarize=False, timestamp=start + timedelta(minutes=i))
        for i in range(3 * WORKING_PAGE)
    ]

    with CaptureQueriesContext(connection) as read:
        rows = _working_rows("a1", "s1", limit=10 * (WORKING_PAGE + 5))

    # Newest first, until the counts pass the limit: into the second page, not the third.
    assert [row.id for row in rows] == [m.pk for m in sent[::-1][: WORKING_PAGE + 6]]
    assert len(read.captured_queries) == 2
    assert all("LIMIT" in query["sql"] for query in read.captured_queries)


def test_short_term_takes_the_three_newest_summaries_without_a_query():
    made = [summary(f"summary {i}") for i in range(5)]
    summary("elsewhere", session="s2")
    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)
    layer = context.layers["short_term"]
    assert (layer.method, [i.id for i in layer.items]) == ("newest", [m.pk for m in made[:1:-1]])


def test_without_vectors_short_term_takes_the_summaries_the_query_matches_then_the_newest():
    tea = summary("we talked about green tea and oolong")
    steps = [summary(f"we planned step {i} of the deployment") for i in range(4)]
    summary("green tea again", session="s2")

    context = context_build(agent_id="a1", session_id="s1", query="green tea", model_window=8192)

    layer = context.layers["short_term"]
    assert [(i.id, i.method, i.why) for i in layer.items] == [
        (tea.pk, "lexical", "among the 3 best text matches"),
        (steps[3].pk, "newest", "newest summary"),
        (steps[2].pk, "newest", "newest summary"),
    ]
    assert layer.items[0].score == 1.0 and layer.method == "mixed"  # the share of the best


def test_long_term_without_a_query_goes_by_access_count_and_counts_no_use():
    used_most = memory("likes tea", access_count=9)
    memory("lives in Berlin", access_count=1)
    second = memory("works on orca", access_count=5)
    memory("other agent's secret", agent="a2", access_count=99)

    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=8192)

    layer = context.layers["long_term"]
    assert (layer.method, [i.id for i in layer.items]) == (
        "access_count",
        [used_most.pk, second.pk],
    )
    assert {i.why for i in layer.items} == {"no query: most used"}
    # Counted, a fallback inclusion would keep the memory first for ever.
    used_most.refresh_from_db()
    assert used_most.access_count == 9 and used_most.last_accessed is None
    assert "Long-term memory" in context.messages[0]["content"]
    assert "likes tea" in context.messages[0]["content"]


def test_with_vectors_both_memory_layers_go_by_similarity_and_the_query_is_embedded_once(
    fake_embedder,
):
    summary("we talked about green tea and oolong")
    summary("we planned the deployment for friday")
    tea = memory("the user drinks green tea every day", "preference")
    memory("the project deadline is in march", "project")
    vectors.embed_pending()
    calls = len(fake_embedder.calls)

    context = context_build(agent_id="a1", session_id="s1", query="green tea", model_window=8192)

    assert len(fake_embedder.calls) == calls + 1
    short, long = context.layers["short_term"], context.layers["long_term"]
    assert (short.method, long.method) == ("similarity", "similarity")
    assert short.items[0].content.startswith("we talked about green tea")
    assert long.items[0].id == tea.pk and long.items[0].score > long.items[1].score


def test_expired_memories_are_down_weighted_not_dropped(fake_embedder):
    expired = memory("green tea green tea", expires_at=timezone.now() - timedelta(days=1))
    active = memory("green tea and cake")
    vectors.embed_pending()

    items = (
        context_build(agent_id="a1", session_id="s1", query="green tea", model_window=8192)
        .layers["long_term"]
        .items
    )

    assert [i.id for i in items] == [active.pk, expired.pk]
    assert items[1].expired is True


def test_over_budget_it_cuts_long_term_then_short_term_then_the_oldest_messages(on_thursday):
    # Rendered sizes: a summary line "- " + 240 chars + newline = 61 tokens, a memory line
    # "- [fact, since 3 December 2026] " + 400 chars + newline = 109; the section headers 7
    # and 11 tokens, the date line DATE_LINE.
    for _ in range(6):  # 6 x 50 = 300 = the working share of a 1000 window
        add_message(tokens(50), role="assistant")
    for i in range(3):
        summary(tokens(60, f"s{i}xx"))
    for i in range(2):
        memory(tokens(100, f"m{i}xx"), access_count=5)

    # 12 + 300 + (7 + 3 x 61) + (11 + 2 x 109) = 731 > 600: long-term goes to 1 item, 622
    # still over.
    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=1000)
    assert context.cuts == [
        "long_term cut from 2 to 1 item",
        "short_term cut from 3 to 1 item",
    ]
    assert context.used == DATE_LINE + 300 + (7 + 61) + (11 + 109) <= context.budget
    assert [o.reason for o in context.layers["long_term"].left_out] == ["over budget"]

    # Still over after both cuts: the oldest working messages go, the newest stay.
    ShortTermMemory.objects.update(content=tokens(170, "tttt"))
    LongTermMemory.objects.update(content=tokens(200, "mmmm"))
    context = context_build(agent_id="a1", session_id="s1", query=None, model_window=1000)
    assert context.cuts == [
        "long_term cut from 2 to 1 item",
        "short_term cut from 3 to 1 item",
        "working memory dropped its 3 oldest message(s)",
    ]
    assert context.used == DATE_LINE + (7 + 171) + (11 + 209) + 3 * 50 <= context.budget
    assert len(context.layers["working"].items) == 3
    assert sum(estimate_tokens(m["content"]) for m in context.messages) <= context.budget


@pytest.mark.parametrize(
    "query",
    [
        "你还记得我吗？",
        "上次说的那家餐厅",
        "我的偏好是什么",
        "Do you remember me?",
        "what was my preference again",
        "like LAST TIME",
    ],
)
def test_identity_queries_are_recognised(query):
    assert is_identity_query(query)


@pytest.mark.parametrize(
    "query", [None, "", "部署到服务器", "what time is it", "remembering is hard"]
)
def test_ordinary_queries_are_not_identity_queries(query):
    assert not is_identity_query(query)


def test_identity_recall_puts_preferences_first_and_tops_up_with_facts_and_preferences(
    fake_embedder,
):
    preference = memory("user prefers short answers about tea", "preference")
    fact = memory("user tea farm visit in may", "fact")
    popular = memory("completely unrelated project note", "project", access_count=50)
    memory("another unrelated note", "decision", access_count=1)
    vectors.embed_pending()

    context = context_build(
        agent_id="a1", session_id="s1", query="do you remember my tea preference", model_window=8192
    )

    items = context.layers["long_term"].items
    assert context.identity_recall is True
    assert items[0].id == preference.pk
    assert {i.id for i in items} >= {preference.pk, fact.pk}
    # A project or a decision is not who the person is, however often it was used.
    assert popular.pk not in {i.id for i in items}


def test_context_never_includes_another_agent_or_a_subagent_transcript(api_for):
    from subagents.runs import subagent_finish, subagent_record

    parent = add_message("please ask the coder", role="assistant")
    subagent_record(parent=parent, agent_name="coder", role="assistant", content="zebra reasoning")
    subagent_finish(parent=parent, agent_name="coder", content="the result")
    add_message("their secret", agent_id="a2")
    memory("their memory", agent="a2")
    summary("their summary", agent="a2")

    response = api_for("a1").post(
        "/sessions/s1/context", {"query": "secret zebra", "model_window": 4096}
    )

    assert response.status_code == 200
    body = response.json()
    text = str({**body, "explanation": {**body["explanation"], "query": None}})
    assert "zebra" not in text and "their" not in text
    assert [m["content"] for m in body["messages"]] == [
        "please ask the coder",
        "[result of sub-agent coder] the result",
    ]
    explanation = body["explanation"]
    assert explanation["budget"] == int(4096 * 0.6)
    assert set(explanation["layers"]) == {"working", "short_term", "long_term", "recall"}
    assert explanation["layers"]["working"]["used"] == sum(
        item["tokens"] for item in explanation["layers"]["working"]["items"]
    )
    assert explanation["degraded"] == [
        "vector search is unavailable: no embedding provider is configured"
    ]


def test_the_endpoint_validates_its_body(api):
    assert api.post("/sessions/s1/context", {"model_window": 10}).status_code == 422
    assert api.post("/sessions/s1/context", {"query": "\u0000"}).status_code == 422
    body = api.post("/sessions/new-session/context", {}).json()
    assert body["explanation"]["model_window"] == 8192 and body["messages"] == []


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("how many days ago did we go camping?", "Today is Thursday 3 December 2026, 14:05 UTC."),
        ("我们多少天前去露营的？", "今天是2026年12月3日星期四，UTC 14:05。"),
        (None, "Today is Thursday 3 December 2026, 14:05 UTC."),  # the newest user message's
    ],
    ids=["english", "chinese", "no query"],
)
def test_the_system_message_opens_with_the_date_and_the_dated_lines_it_counts_from(
    on_thursday, query, line
):
    """'How many days ago' needs both ends: today (UTC, as every date of the context) in the
    query's language, and each recalled line's own date."""
    add_message(
        "We went camping at the lake. 我们去湖边露营了。",
        session_id="old",
        timestamp=datetime(2026, 11, 20, 9, 30, tzinfo=UTC),
        summarize=False,
    )
    add_message("Where did we go camping?", session_id="new", summarize=False)

    context = context_build(agent_id="a1", session_id="new", query=query, model_window=4096)

    system = context.messages[0]["content"]
    assert system.startswith(line + "\n\nRecalled from earlier conversations:\n")
    assert "- [20 November 2026 09:30] user: We went camping" in system
    assert context.date_line == line
    assert context.date_line_tokens == header_tokens(line)
    layers = sum(layer.used for layer in context.layers.values())
    assert context.used == layers + context.date_line_tokens <= context.budget


def test_the_date_line_is_in_utc_whatever_the_clocks_zone():
    friday_in_shanghai = datetime(2026, 12, 4, 2, 5, tzinfo=ZoneInfo("Asia/Shanghai"))

    assert date_line(friday_in_shanghai, "hello") == "Today is Thursday 3 December 2026, 18:05 UTC."
    assert date_line(friday_in_shanghai, "你好") == "今天是2026年12月3日星期四，UTC 18:05。"


def test_the_api_explains_the_date_line(api, on_thursday):
    api.post("/sessions/old/messages", {"role": "user", "content": "We went camping."})
    api.post("/sessions/new/messages", {"role": "user", "content": "where did we go camping?"})

    body = api.post("/sessions/new/context", {"model_window": 4096}).json()
    empty = api.post("/sessions/nothing/context", {"query": "zebra"}).json()

    explanation = body["explanation"]
    assert explanation["date_line"] == "Today is Thursday 3 December 2026, 14:05 UTC."
    assert body["messages"][0]["content"].startswith(explanation["date_line"] + "\n\n")
    assert explanation["date_line_tokens"] == DATE_LINE
    layers = sum(layer["used"] for layer in explanation["layers"].values())
    assert explanation["used"] == layers + DATE_LINE
    assert (empty["explanation"]["date_line"], empty["explanation"]["date_line_tokens"]) == (
        None,
        0,
    )
    assert empty["messages"] == []
