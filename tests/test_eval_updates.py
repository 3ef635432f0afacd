"""The update-heavy evaluation's rules (bench/updates.py), on contexts made by hand: when a
context holds a changed fact's current value, and when it shows a superseded one as current."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from bench.updates import UpdatesReport, Verdict, judge, phrase_in, superseded_among
from memory.context_items import (
    Context,
    Layer,
    MemoryItem,
    RecalledItem,
    WorkingItem,
    system_message,
)
from memory.models import LongTermMemory

SAID_AT = datetime(2026, 3, 2, 20, 30, tzinfo=UTC)
TURNS = {
    "D2:1": "I live in Paris, so anything you suggest has to work there.",
    "D9:5": "Quick update: I've left Paris and I'm living in Berlin now. Any tips for packing?",
}
QUESTION = {
    "question": "Which city do I live in now?",
    "answer": "Berlin",
    "evidence": ["D9:5"],
    "superseded": ["D2:1"],
    "superseded_values": ["Paris"],
}
CONTROL = {
    "question": "What do I drink first thing every morning?",
    "answer": "green tea",
    "evidence": ["D3:1"],
    "superseded": [],
    "superseded_values": [],
}


def memory(memory_id: int, text: str, *, expired: bool = False) -> MemoryItem:
    return MemoryItem.made(
        memory_id,
        text,
        memory_type="fact",
        since=date(2026, 3, 1),
        expired=expired,
        confidence=0.5,
        access_count=0,
        curated=False,
    )


def recalled(message_id: int, text: str, *, day: int) -> RecalledItem:
    when = SAID_AT + timedelta(days=day)
    return RecalledItem.made(
        message_id,
        text,
        session_id=f"up-01:session_{day}",
        line=f"- [{when:%d %B %Y %H:%M}] Maya: {text}",
        opens=True,
        timestamp=when,
        role="user",
    )


def context(memories: list[MemoryItem] = (), recall: list[RecalledItem] = ()) -> Context:
    """A context as context_build returns it: the question in working memory, the memories
    and recalled messages in the system message."""
    question = WorkingItem.made(
        99, QUESTION["question"], QUESTION["question"], role="user", chat_role="user"
    )
    layers = {
        "working": Layer(100, 100, "newest", [question]),
        "short_term": Layer(100, 100, "newest", []),
        "long_term": Layer(100, 100, "similarity", list(memories), 5),
        "recall": Layer(100, 100, "hybrid", list(recall), 5),
    }
    system = system_message(layers, "Today is Thursday 3 December 2026, 14:05 UTC.")
    messages = ([{"role": "system", "content": system}] if system else []) + [question.message()]
    return Context(8192, 4915, QUESTION["question"], "request", layers, messages, [], [], False)


def test_it_finds_the_current_value_in_the_newest_statements_turn():
    shown = context(recall=[recalled(1, TURNS["D9:5"], day=60)])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict("turn", [])


def test_it_finds_the_current_value_in_a_memory_shown_as_current():
    shown = context(memories=[memory(7, "Maya: We moved to Berlin in May.")])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict("memory", [])


def test_it_finds_neither_when_the_context_does_not_hold_the_value():
    assert judge(context(), QUESTION, TURNS, set()) == Verdict("", [])


def test_it_counts_an_old_value_in_a_current_memory_as_stale_though_the_new_one_is_there():
    shown = context(
        memories=[memory(3, "Maya: I live in Paris, so anything you suggest has to work there.")],
        recall=[recalled(1, TURNS["D9:5"], day=60)],
    )

    verdict = judge(shown, QUESTION, TURNS, set())

    assert verdict.current == "turn"
    assert verdict.stale == [
        "memory #3 shows 'Paris': Maya: I live in Paris, so anything you suggest has to work there."
    ]


def test_it_does_not_count_an_old_value_in_a_superseded_or_expired_memory():
    paris = "Maya: I live in Paris, so anything you suggest has to work there."

    superseded = judge(context(memories=[memory(3, paris)]), QUESTION, TURNS, {3})
    expired = judge(context(memories=[memory(3, paris, expired=True)]), QUESTION, TURNS, set())

    assert superseded == expired == Verdict("", [])


def test_it_reads_a_memory_that_holds_both_values_as_the_change():
    shown = context(memories=[memory(5, "Maya: I've left Paris and I'm living in Berlin now.")])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict("memory", [])


def test_it_does_not_count_an_old_value_recalled_with_its_date_beside_the_current_one():
    shown = context(recall=[recalled(1, TURNS["D2:1"], day=1), recalled(2, TURNS["D9:5"], day=60)])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict("turn", [])


def test_it_counts_an_old_value_recalled_when_the_context_shows_the_current_one_nowhere():
    shown = context(recall=[recalled(1, TURNS["D2:1"], day=1)])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict(
        "", ["recall shows 'Paris' and nothing shows 'Berlin'"]
    )


def test_it_does_not_count_an_old_value_recalled_beside_the_current_one_said_back():
    # The assistant's reply says the new city back; the user's turn is not in the context.
    reply = "Settling into life in Berlin takes a few months, so be patient with yourself."
    shown = context(recall=[recalled(1, TURNS["D2:1"], day=1), recalled(2, reply, day=60)])

    assert judge(shown, QUESTION, TURNS, set()) == Verdict("", [])


def test_it_finds_an_unchanged_fact_and_never_calls_it_stale():
    turns = {"D3:1": "I start every morning with a cup of green tea."}
    shown = context(
        memories=[memory(2, "Maya: I start every morning with a cup of green tea.")],
        recall=[recalled(4, "I've also started having espresso in the afternoons.", day=40)],
    )

    assert judge(shown, CONTROL, turns, set()) == Verdict("turn+memory", [])


@pytest.mark.parametrize(
    ("phrase", "text", "found"),
    [
        ("Berlin", "we moved to berlin last week", True),
        ("Pixel 7", "My Pixel 70 broke", False),
        ("Pixel 7", "My Pixel 7, sadly, broke", True),
        ("$1,200", "it's $1,200 now", True),
        ("$1,200", "it's $1,2000 now", False),
        ("iPhone15", "华为Mate60坏了，现在用iPhone15。", True),
        ("腾讯", "我跳槽到腾讯了", True),
        ("Theo", "Theodore is my cousin", False),
    ],
)
def test_it_matches_key_phrases_as_words_or_chinese_substrings(phrase, text, found):
    assert phrase_in(phrase, text) is found


@pytest.mark.django_db
def test_it_takes_a_memory_past_its_valid_until_or_with_a_successor_as_superseded():
    now = datetime(2026, 12, 3, tzinfo=UTC)
    made = {
        name: LongTermMemory.objects.create(
            agent_id="a", content=name, memory_type="fact", **fields
        )
        for name, fields in {
            "current": {},
            "until later": {"valid_until": now + timedelta(days=1)},
            "until before": {"valid_until": now - timedelta(days=1)},
        }.items()
    }
    successor = LongTermMemory.objects.create(agent_id="a", content="new", memory_type="fact")
    made["replaced"] = LongTermMemory.objects.create(
        agent_id="a", content="old", memory_type="fact", superseded_by=successor
    )

    found = superseded_among([m.pk for m in made.values()], now)

    assert found == {made["until before"].pk, made["replaced"].pk}


def test_it_reports_the_rate_and_the_stale_count_per_kind_and_language():
    report = UpdatesReport(window=8192, latencies=[0.01, 0.02])
    rows = [
        ("changed_once", "en", Verdict("turn", [])),
        ("changed_once", "zh", Verdict("", ["recall shows 'x' and nothing shows 'y'"])),
        ("changed_twice", "en", Verdict("memory", ["memory #1 shows 'x': x"])),
        ("unchanged", "zh", Verdict("turn", [])),
    ]
    for n, (kind, language, verdict) in enumerate(rows):
        question = QUESTION | {"conversation_id": "up-01", "qa_index": n}
        report.add(question | {"category": kind, "language": language}, verdict)

    data = report.as_dict()

    assert (data["questions"], data["current_value_rate"], data["stale_as_current"]) == (4, 0.75, 2)
    assert data["by_kind"] == {
        "changed_once": {"questions": 2, "current_value_rate": 0.5, "stale_as_current": 1},
        "changed_twice": {"questions": 1, "current_value_rate": 1.0, "stale_as_current": 1},
        "unchanged": {"questions": 1, "current_value_rate": 1.0, "stale_as_current": 0},
    }
    assert data["by_language"]["zh"] == {
        "questions": 2,
        "current_value_rate": 0.5,
        "stale_as_current": 1,
    }
