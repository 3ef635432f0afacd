"""The order recall tries its candidates in (memory.recall_rank): the best of each session
before a session's second, and the period a question names first; in both languages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from django.utils import timezone

from memory.context import context_build
from memory.models import MainMessage
from memory.recall_rank import PERIOD_BOOST, is_aggregation, ranked
from memory.search import SearchHit
from tests.factories import add_message

NOW = datetime(2023, 5, 11, 9, 0, tzinfo=UTC)
JANUARY = datetime(2023, 1, 14, 20, 0, tzinfo=UTC)
FEBRUARY = datetime(2023, 2, 18, 20, 0, tzinfo=UTC)
MARCH = datetime(2023, 3, 18, 20, 0, tzinfo=UTC)


def hit(
    pk: int, session: str, score: float, when: datetime = MARCH, role: str = "user"
) -> SearchHit:
    message = MainMessage(pk=pk, agent_id="a1", session_id=session, timestamp=when, role=role)
    return SearchHit(message, score, score, None, pk, None)


def order(hits: list[SearchHit], query: str) -> list[int]:
    return [h.message.pk for h in ranked(hits, query=query, now=NOW)]


@pytest.mark.parametrize("query", ["Which books have I finished?", "我读完了哪些书？"])
def test_the_best_of_another_session_comes_before_a_sessions_second(query):
    hits = [hit(1, "a", 1.0), hit(2, "a", 0.97), hit(3, "a", 0.95), hit(4, "b", 0.9)]

    assert order(hits, query) == [1, 4, 2, 3]


@pytest.mark.parametrize("query", ["How many times did I go climbing?", "我去攀岩了几次？"])
def test_a_persons_turn_is_not_lowered_for_the_agents_reply_in_its_session(query):
    # The agent's long reply matches more words than the turn that names the event.
    hits = [hit(1, "a", 1.0, role="assistant"), hit(2, "a", 0.9), hit(3, "b", 0.85)]

    assert order(hits, query) == [1, 2, 3]


def test_within_a_session_the_search_order_holds():
    hits = [hit(1, "a", 1.0), hit(2, "b", 0.5), hit(3, "a", 0.4), hit(4, "a", 0.3)]

    assert order(hits, "Which books have I finished?") == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "query", ["What book did I finish in the summer?", "我读完的那本书叫什么？"]
)
def test_a_question_that_gathers_nothing_keeps_the_search_order(query):
    # One answer, often several turns of one session (LoCoMo lost recall when spread).
    hits = [hit(1, "a", 1.0), hit(2, "a", 0.97), hit(3, "a", 0.95), hit(4, "b", 0.9)]

    assert order(hits, query) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("query", "gathers"),
    [
        ("How many times did I go climbing in January?", True),
        ("How often do I run?", True),
        ("Which new restaurants have we tried this year?", True),
        ("What books have I finished reading so far?", True),
        ("Tell me all the places we visited", True),
        ("我三月份去攀岩了几次？", True),
        ("我读完了哪些书？", True),
        ("我一共点了多少次外卖？", True),
        ("What am I allergic to?", False),
        ("When did I move to Leipzig?", False),
        ("我对什么过敏？", False),
        ("我是哪天到的成都？", False),
    ],
)
def test_it_knows_a_question_that_gathers_mentions(query, gathers):
    assert is_aggregation(query) is gathers


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


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "loud", "quiet"),
    [
        (
            "How many concerts did I go to last month?",
            "A concert again tonight, what a concert",
            "Saw a concert with Mia after work",
        ),
        (
            "上个月我去了几次音乐会？",
            "今晚又去听了一场爵士音乐会，音乐会现场人很多，音乐会很精彩",
            "下班后和小米去看了音乐会，然后吃了晚饭",
        ),
    ],
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
    [
        (
            "Which books have I finished reading?",
            "Finished reading two books, books are my thing",
            "Finished reading Circe on the train home, the ending made me cry a little",
        ),
        (
            "我读完了哪些书？",
            "又读完了一章，每天晚上都读书，读书读完了很开心",
            "读完了《活着》这本书",
        ),
    ],
)
def test_a_context_recalls_a_mention_from_each_session(query, loud, quiet):
    for number in range(5):  # one session that says it loudest, five times
        say(f"{loud} ({number})", session_id="loud", timestamp=JANUARY + timedelta(minutes=number))
    say(quiet, session_id="quiet", timestamp=FEBRUARY)

    recalled = _recalled(query)

    assert quiet in recalled
    assert 0 < len(recalled) < 6
