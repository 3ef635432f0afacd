"""What a hybrid search raises above its words and meaning (memory.search): the messages of a
period the question names, never required; the person's words that answer it, known from
their memories (the current value of an attribute asked for, the preferences a
recommendation must respect); in both languages, and in the context's recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from django.utils import timezone

from memory import search as search_module
from memory import vectors
from memory.context import context_build
from memory.memories import memory_create
from memory.search import IN_THE_PERIOD, OF_ITS_DAY, SAID_BY_THE_PERSON, SearchQuery, search
from tests.factories import add_message

pytestmark = pytest.mark.django_db

say = partial(add_message, summarize=False)
NOW = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
JANUARY = datetime(2023, 1, 14, 20, 0, tzinfo=UTC)
FEBRUARY = datetime(2023, 2, 18, 20, 0, tzinfo=UTC)
MARCH = datetime(2023, 3, 18, 20, 0, tzinfo=UTC)


def _order(query: str, mode: str = "hybrid") -> list[int]:
    result = search(agent_id="a1", query=SearchQuery(query, mode=mode), now=NOW)
    return [hit.message.pk for hit in result.hits]


def _concerts(text: str = "went to a concert") -> list[int]:
    """The same words in March, January and February, stored in that order (equal scores:
    without a period the first stored comes first)."""
    return [
        say(text, session_id=session, timestamp=when).pk
        for session, when in (("march", MARCH), ("jan", JANUARY), ("feb", FEBRUARY))
    ]


# --- a period -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "How many times did I go to a concert in February?",
        "我二月份去了几次concert？",
        "How many times did I go to a concert in February 2023?",
        "2023年2月我去了几次concert？",
    ],
)
def test_a_message_of_the_period_the_question_names_comes_first(query):
    march, january, february = _concerts()

    result = search(agent_id="a1", query=SearchQuery(query), now=NOW)

    assert [hit.message.pk for hit in result.hits] == [february, march, january]
    assert result.hits[0].raised == (IN_THE_PERIOD,)
    assert result.hits[1].raised == ()


@pytest.mark.parametrize(
    ("query", "without"),
    [
        ("How many concerts did I go to last month?", "How many concerts did I go to?"),
        ("上个月我去了几次concert？", "我去了几次concert？"),
        ("What concert did I go to in the past two weeks?", "What concert did I go to?"),
    ],
)
def test_a_period_that_holds_no_message_changes_nothing(query, without):
    # Asked on 11 May 2023 about messages of January to March: imported from the past.
    stored = _concerts()

    assert _order(query) == _order(without) == stored


@pytest.mark.parametrize(
    "query", ["What concert did I go to in February?", "我二月份去了什么concert？"]
)
def test_a_message_of_the_days_just_after_a_period_may_tell_of_it(query):
    # "I went to a concert on Saturday", said on 2 March.
    later = say("went to a concert", session_id="m6", timestamp=datetime(2023, 3, 6, tzinfo=UTC))
    after = say("went to a concert", session_id="m2", timestamp=datetime(2023, 3, 2, tzinfo=UTC))

    assert _order(query) == [after.pk, later.pk]


def test_the_boost_is_a_share_of_the_best_score_whatever_its_scale():
    # Answered lexically (no vectors here): BM25 has no 0-1 scale. The February message says
    # the word among more others, a lower score but within the boost of the best.
    march = say("concert tonight", session_id="march", timestamp=MARCH)
    february = say("a concert with friends tonight", session_id="feb", timestamp=FEBRUARY)

    assert _order("concert tonight in February") == [february.pk, march.pk]
    assert _order("concert tonight in April") == [march.pk, february.pk]


def test_only_a_hybrid_search_raises_anything():
    # 二月份 is no word of the messages' English date labels: only the period could raise.
    march, january, february = _concerts()

    assert _order("我二月份去了几次concert？", mode="lexical") == [march, january, february]
    assert _order("我二月份去了几次concert？")[0] == february


# --- a question asking when ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "plans", "done"),
    [
        (
            "On what day did I have my driving theory test?",
            "driving theory test next week, nervous",
            "driving theory test this morning, nervous",
        ),
        (
            "我是哪天考的驾照科目二？",
            "驾照科目二考的是倒车，在下周。",
            "驾照科目二在昨日，有点紧张。",
        ),
    ],
)
def test_a_question_asking_when_finds_the_message_that_told_of_its_day(question, plans, done):
    # The same words but the day: without the raise the one stored first comes first.
    before = say(plans, session_id="plans", timestamp=JANUARY)
    after = say(done, session_id="done", timestamp=FEBRUARY)

    asked_when = search(agent_id="a1", query=SearchQuery(question), now=NOW).hits
    asked_how = search(agent_id="a1", query=SearchQuery(question.replace("哪天", "怎么")), now=NOW)

    assert [hit.message.pk for hit in asked_when] == [after.pk, before.pk]
    assert asked_when[0].raised == (OF_ITS_DAY,)
    if question.startswith("我"):  # asked how, not when: nothing raised
        assert [hit.message.pk for hit in asked_how.hits] == [before.pk, after.pk]
        assert [hit.raised for hit in asked_how.hits] == [(), ()]


# --- the person's words, known from a memory -----------------------------------------------


def _said_and_remembered(text: str, memory_type: str = "fact", **fields) -> int:
    """A message of the person's, made a memory as consolidation makes one; its id."""
    message = say(text, session_id="past", timestamp=MARCH, **fields)
    memory_create(
        agent_id="a1",
        content=text,
        memory_type=memory_type,
        actor="consolidation",
        source_messages=[message.pk],
    )
    return message.pk


def _noise(count: int, text: str) -> None:
    for number in range(count):
        say(f"{text} {number}", session_id=f"noise-{number}", timestamp=MARCH)


@pytest.mark.parametrize(
    ("question", "answer", "older", "noise"),
    [
        (
            "What do I do for a living?",
            "I'm a data engineer at a bank, so spreadsheets follow me home.",
            "I work as a teacher at the primary school.",
            "What do people do for a living in a small town?",
        ),
        (
            "我是做什么工作的？",
            "我现在是一名护士，经常上夜班。",
            "我是一名老师，在小学教数学。",
            "做什么工作比较轻松？",
        ),
    ],
)
def test_a_question_about_an_attribute_finds_where_its_current_value_was_said(
    question, answer, older, noise
):
    _noise(12, noise)  # the question's own words, many times: none answers it
    said_before = _said_and_remembered(older)
    said_now = _said_and_remembered(answer)

    result = search(agent_id="a1", query=SearchQuery(question), now=NOW + timedelta(days=900))

    assert result.hits[0].message.pk == said_now
    assert result.hits[0].raised == (SAID_BY_THE_PERSON,)
    assert said_before not in [hit.message.pk for hit in result.hits[:1]]


def test_the_said_value_keeps_to_the_searchs_filters():
    said = _said_and_remembered("I work as a paramedic in the city.")
    question = "What do I do for a living?"

    for query in (
        SearchQuery(question, role="assistant"),
        SearchQuery(question, session_id="elsewhere"),
        SearchQuery(question, exclude_session="past"),
        SearchQuery(question, exclude_ids=frozenset({said})),
        SearchQuery(question, until=JANUARY),
        SearchQuery(question, mode="lexical"),
    ):
        hits = search(agent_id="a1", query=query, now=NOW).hits
        assert said not in [hit.message.pk for hit in hits], query


@pytest.mark.parametrize(
    ("question", "preference", "decision"),
    [
        (
            "What should I cook for a dinner party this weekend?",
            "Honestly, I've been vegetarian for six years now.",
            "We decided to paint the hallway green.",
        ),
        ("这周末家里请客，我该做什么菜？", "我吃素已经六年了。", "我们决定把走廊刷成绿色。"),
    ],
)
def test_a_recommendation_finds_the_preferences_it_must_respect(
    fake_embedder, question, preference, decision
):
    # The fake model's floor is 0: any preference or fact of the person qualifies, and no
    # decision; an unrelated one would not under the default model's (tests/
    # test_context_relevance.py).
    _noise(12, question)
    respected = _said_and_remembered(preference, "preference")
    decided = _said_and_remembered(decision, "decision")
    vectors.prepare_index(fake_embedder.signature)
    vectors.embed_pending(embedder=fake_embedder)

    hits = search(agent_id="a1", query=SearchQuery(question), now=NOW).hits

    assert hits[0].message.pk == respected
    assert hits[0].raised == (SAID_BY_THE_PERSON,)
    assert decided not in [hit.message.pk for hit in hits if hit.raised]


def test_asked_for_its_own_advice_the_agent_finds_its_replies_first(fake_embedder):
    _said_and_remembered("我吃素已经六年了。", "preference")
    reply = say("热身可以先慢跑五分钟，再做动态拉伸。", role="assistant", session_id="past")
    vectors.prepare_index(fake_embedder.signature)
    vectors.embed_pending(embedder=fake_embedder)

    hits = search(agent_id="a1", query=SearchQuery("你建议我跑步前怎么热身？"), now=NOW).hits

    assert [hit.raised for hit in hits] == [()] * len(hits)
    assert reply.pk in [hit.message.pk for hit in hits]


# --- in a context ---------------------------------------------------------------------------

say = partial(add_message, summarize=False)
# Room for about three recalled lines besides the question.
WINDOW = 260


def _recalled(query: str) -> list[str]:
    say(query, session_id="now")
    context = context_build(agent_id="a1", session_id="now", query=query, model_window=WINDOW)
    return [item.content for item in context.layers["recall"].items]


def _months_ago(count: int) -> datetime:
    """The 15th of the month `count` months before this one (the context counts from now)."""
    today = timezone.now()
    index = today.year * 12 + today.month - 1 - count
    return datetime(index // 12, index % 12 + 1, 15, 20, 0, tzinfo=UTC)


# (a question naming last month, a mention said louder and earlier, the mention of last month)
CONCERTS = [
    (
        "How many concerts did I go to last month?",
        "A concert tonight",
        "Saw a concert with Mia after work",
    ),
    (
        "上个月我去了几次音乐会？",
        "今晚去听了音乐会",
        "下班后和小米去看了音乐会，然后吃了晚饭",
    ),
]


@pytest.mark.parametrize(
    ("query", "loud", "quiet"),
    CONCERTS,
)
def test_a_context_recalls_the_mention_of_the_period_asked_about(query, loud, quiet):
    for number in range(8):  # louder mentions three months ago, each a session of its own
        say(loud, session_id=f"old-{number}", timestamp=_months_ago(3) + timedelta(days=number))
    say(quiet, session_id="last-month", timestamp=_months_ago(1))

    recalled = _recalled(query)

    assert quiet in recalled
    assert 0 < len(recalled) < 9  # not everything fits: the period chose


@pytest.mark.parametrize(
    ("query", "loud", "quiet"),
    CONCERTS,
)
def test_a_period_that_holds_no_message_leaves_the_context_as_it_was(
    monkeypatch, query, loud, quiet
):
    # Every mention is older than last month: a conversation imported from the past.
    for number in range(8):
        say(loud, session_id=f"old-{number}", timestamp=_months_ago(4) + timedelta(days=number))
    say(quiet, session_id="later", timestamp=_months_ago(3))

    def recall_items() -> list[tuple[int, str]]:
        context = context_build(agent_id="a1", session_id="now", query=query, model_window=WINDOW)
        return [(item.id, item.why) for item in context.layers["recall"].items]

    say(query, session_id="now")
    boosted = recall_items()
    monkeypatch.setattr(search_module, "PERIOD_BOOST", 0.0)

    assert boosted and recall_items() == boosted
