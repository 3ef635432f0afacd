"""The order recall tries its candidates in (memory.recall_rank): the period a question names
first, and nothing changed by a period that holds no message; in both languages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from django.utils import timezone

from memory import recall_rank
from memory.context import context_build
from memory.models import MainMessage
from memory.recall_rank import PERIOD_BOOST, ranked
from memory.search import SearchHit
from tests.factories import add_message

NOW = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
JANUARY = datetime(2023, 1, 14, 20, 0, tzinfo=UTC)
FEBRUARY = datetime(2023, 2, 18, 20, 0, tzinfo=UTC)
MARCH = datetime(2023, 3, 18, 20, 0, tzinfo=UTC)


def hit(pk: int, session: str, score: float, when: datetime = MARCH) -> SearchHit:
    message = MainMessage(pk=pk, agent_id="a1", session_id=session, timestamp=when)
    return SearchHit(message, score, score, None, pk, None)


def order(hits: list[SearchHit], query: str) -> list[int]:
    return [h.message.pk for h in ranked(hits, query=query, now=NOW)]


@pytest.mark.parametrize(
    "query",
    [
        "How many concerts did I go to in February?",
        "我二月份去了几次音乐会？",
        "How many concerts did I go to in February 2023?",
        "2023年2月我去了几次音乐会？",
    ],
)
def test_a_hit_of_the_period_the_question_names_comes_first(query):
    hits = [hit(1, "march", 1.0, MARCH), hit(2, "jan", 0.95, JANUARY), hit(3, "feb", 0.8, FEBRUARY)]

    assert order(hits, query)[0] == 3


@pytest.mark.parametrize(
    ("query", "without"),
    [
        ("How many concerts did I go to last month?", "How many concerts did I go to?"),
        ("上个月我去了几次音乐会？", "我去了几次音乐会？"),
        ("What did I do in the past two weeks?", "What did I do?"),
        ("最近两周我做了什么？", "我做了什么？"),
    ],
)
def test_a_period_that_holds_no_hit_changes_nothing(query, without):
    # Asked on 11 May 2023 about messages of January to March: imported from the past.
    hits = [hit(1, "march", 1.0, MARCH), hit(2, "jan", 0.95, JANUARY), hit(3, "feb", 0.8, FEBRUARY)]

    assert order(hits, query) == order(hits, without) == [1, 2, 3]


@pytest.mark.parametrize("query", ["What did I do in February?", "我二月份做了什么？"])
def test_a_message_of_the_days_just_after_a_period_may_tell_of_it(query):
    # "I went to a concert on Saturday", said on 2 March.
    hits = [
        hit(1, "march-6", 1.0, datetime(2023, 3, 6, 9, 0, tzinfo=UTC)),
        hit(2, "march-2", 0.8, datetime(2023, 3, 2, 9, 0, tzinfo=UTC)),
    ]

    assert order(hits, query) == [2, 1]


def test_scores_count_as_shares_of_the_best_whatever_their_scale():
    # BM25 (lexical mode) is not on a 0-1 scale: the boost is a share of the best hit's score.
    hits = [hit(1, "march", 12.0, MARCH), hit(2, "feb", 12.0 * (1 - PERIOD_BOOST / 2), FEBRUARY)]

    assert order(hits, "in February") == [2, 1]
    assert order(hits, "in April") == [1, 2]


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


@pytest.mark.django_db
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


@pytest.mark.django_db
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
    monkeypatch.setattr(recall_rank, "PERIOD_BOOST", 0.0)

    assert boosted and recall_items() == boosted
