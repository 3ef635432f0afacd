"""The hand-written evaluation sets under tests/data/ are well-formed: what `eval_locomo` reads
(bench/evaluation.py) and what each set's README promises."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.evaluation import session_time, turn_keys
from bench.updates import phrase_in
from memory.tokens import estimate_tokens
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data"
SETS = ["zh_multisession", "cross_language", "agent_style", "agent_sessions", "updates"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def turns(name: str) -> list[dict[str, Any]]:
    return lines(DATA / name / "conversations.jsonl")


def queries(name: str) -> list[dict[str, Any]]:
    return lines(DATA / name / "queries.jsonl")


def users(name: str) -> dict[str, str]:
    """Each conversation's user: its first speaker (replay_conversations makes it `user`)."""
    first: dict[str, str] = {}
    for turn in turns(name):
        first.setdefault(turn["conversation_id"], turn["speaker"])
    return first


def readme_counts(name: str) -> dict[str, str]:
    """The README's counts table: the first cell of each row -> the second."""
    rows = re.findall(
        r"^\| ([^|]+?) \| (.+?) \|$", (DATA / name / "README.md").read_text("utf-8"), re.M
    )
    return dict(rows)


def first_number(cell: str) -> int:
    return int(re.search(r"\d[\d,]*", cell).group().replace(",", ""))


@pytest.mark.parametrize("name", SETS)
def test_it_has_unique_turn_ids_and_question_indexes(name):
    ids = [(t["conversation_id"], t["turn_id"]) for t in turns(name)]
    indexes = [q["qa_index"] for q in queries(name)]

    assert len(ids) == len(set(ids))
    assert indexes == list(range(len(indexes)))


@pytest.mark.parametrize("name", SETS)
def test_it_names_turns_after_their_session(name):
    for turn in turns(name):
        session = f"{turn['conversation_id']}/session_{turn['session_index']}"
        assert turn["session_id"] == session
        assert turn["turn_id"].startswith(f"D{turn['session_index']}:")
        assert turn["text"].strip()


@pytest.mark.parametrize("name", SETS)
def test_it_points_every_question_at_turns_of_its_own_conversation(name):
    known = {(t["conversation_id"], t["turn_id"]) for t in turns(name)}
    for question in queries(name):
        assert question["evidence"], question
        assert len(question["evidence"]) == len(set(question["evidence"])), question
        for turn in question["evidence"]:
            assert (question["conversation_id"], turn) in known, question
        assert str(question["answer"]).strip(), question
        assert str(question["question"]).strip(), question
        assert "category" in question


@pytest.mark.parametrize("name", SETS)
def test_it_keeps_sessions_in_time_order_and_asks_after_the_last(name):
    last: dict[str, datetime] = {}
    sessions: dict[tuple[str, int], str] = {}
    for turn in turns(name):
        conversation, index = turn["conversation_id"], turn["session_index"]
        when = session_time(turn["session_datetime"])
        if (conversation, index) in sessions:
            assert sessions[(conversation, index)] == turn["session_datetime"]
            continue
        sessions[(conversation, index)] = turn["session_datetime"]
        if conversation in last:
            assert (conversation, index - 1) in sessions, turn
            assert when > last[conversation], turn
        else:
            assert index == 1, turn
        last[conversation] = when
    for question in queries(name):
        assert session_time(question["asked_at"]) > last[question["conversation_id"]], question


@pytest.mark.parametrize("name", SETS)
def test_it_opens_each_session_with_the_user_and_alternates_speakers(name):
    user = users(name)
    speakers: dict[str, set[str]] = {}
    previous: tuple[str, int, str] | None = None
    for turn in turns(name):
        conversation, index = turn["conversation_id"], turn["session_index"]
        speakers.setdefault(conversation, set()).add(turn["speaker"])
        if previous is None or previous[:2] != (conversation, index):
            assert turn["speaker"] == user[conversation], turn
        else:
            assert turn["speaker"] != previous[2], turn
        previous = (conversation, index, turn["speaker"])
    assert all(len(names) == 2 for names in speakers.values())


@pytest.mark.parametrize("name", SETS)
def test_it_counts_in_its_readme_what_its_files_hold(name):
    counts = readme_counts(name)
    all_turns = turns(name)
    user = users(name)
    said_by_user = sum(t["speaker"] == user[t["conversation_id"]] for t in all_turns)

    assert first_number(counts["conversations"]) == len(user)
    assert first_number(counts["sessions"]) == len(
        {(t["conversation_id"], t["session_index"]) for t in all_turns}
    )
    assert first_number(counts["messages"]) == len(all_turns)
    assert f"{said_by_user} user" in counts["messages"]
    assert f"{len(all_turns) - said_by_user} assistant" in counts["messages"]
    assert first_number(counts["questions"]) == len(queries(name))
    stated = dict(re.findall(r"(\w[\w-]*)[^,:]*: (\d+)", counts["by category"]))
    assert {k: int(v) for k, v in stated.items()} == Counter(
        str(q["category"]) for q in queries(name)
    )


def test_it_asks_the_cross_language_questions_in_the_other_language():
    user = users("cross_language")
    chinese_conversations = {
        t["conversation_id"]
        for t in turns("cross_language")
        if t["speaker"] == user[t["conversation_id"]] and CJK.search(t["text"])
    }
    for question in queries("cross_language"):
        chinese_question = bool(CJK.search(question["question"]))
        assert chinese_question != (question["conversation_id"] in chinese_conversations)
        assert question["category"] == ("zh-asks-en" if chinese_question else "en-asks-zh")
    directions = Counter(q["category"] for q in queries("cross_language"))
    assert directions["en-asks-zh"] >= 40 and directions["zh-asks-en"] >= 40


@pytest.mark.parametrize("name", ["agent_style", "agent_sessions"])
def test_it_marks_the_agents_words_only_for_questions_about_them(name):
    user = users(name)
    speaker = {(t["conversation_id"], t["turn_id"]): t["speaker"] for t in turns(name)}
    for question in queries(name):
        by_assistant = [
            speaker[(question["conversation_id"], turn)] != user[question["conversation_id"]]
            for turn in question["evidence"]
        ]
        assert any(by_assistant) == (question["category"] == "assistant"), question


def test_it_gives_the_agent_long_replies():
    # The README's bounds: 150 to 400 words in English, 300 to 1,000 characters in Chinese.
    user = users("agent_style")
    replies = [t for t in turns("agent_style") if t["speaker"] != user[t["conversation_id"]]]
    english = [t for t in replies if t["speaker"] == "Assistant"]
    chinese = [t for t in replies if t["speaker"] == "助手"]

    assert len(english) + len(chinese) == len(replies) and english and chinese
    for turn in english:
        assert 150 <= len(turn["text"].split()) <= 400, turn["turn_id"]
    for turn in chinese:
        assert 300 <= len(turn["text"]) <= 1000, turn["turn_id"]


# --- agent_sessions: the set issue 33 asks for (its README) ---------------------------------

SESSIONS_SET = DATA / "agent_sessions"
KINDS = {"fact", "changed", "assistant", "temporal", "aggregation", "recommend"}
ENGLISH_MONTHS = [datetime(2026, m, 1).strftime("%B") for m in range(1, 13)]
CHINESE_MONTHS = ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二"]


def chinese(conversation: str) -> bool:
    """A conversation is Chinese when its user writes Chinese."""
    user = users("agent_sessions")[conversation]
    return any(
        CJK.search(t["text"])
        for t in turns("agent_sessions")
        if t["conversation_id"] == conversation and t["speaker"] == user
    )


def reply_words(text: str, *, in_chinese: bool) -> float:
    """The README's rule: words split by whitespace; in Chinese, non-space characters / 2."""
    return len("".join(text.split())) / 2 if in_chinese else len(text.split())


def turn_by_id(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(t["conversation_id"], t["turn_id"]): t for t in turns(name)}


def test_it_generates_the_committed_agent_sessions_files(monkeypatch):
    spec = importlib.util.spec_from_file_location("generate", SESSIONS_SET / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "generate", generate)  # its dataclasses look it up there
    spec.loader.exec_module(generate)

    made_turns, made_questions = generate.generate()

    assert made_turns == turns("agent_sessions")
    assert made_questions == queries("agent_sessions")


def test_it_gives_six_users_900_messages_and_250k_tokens_over_months_in_two_languages():
    user = users("agent_sessions")
    messages = Counter(t["conversation_id"] for t in turns("agent_sessions"))
    tokens: Counter[str] = Counter()
    months: dict[str, set[int]] = {c: set() for c in user}
    for turn in turns("agent_sessions"):
        tokens[turn["conversation_id"]] += estimate_tokens(turn["text"])
        months[turn["conversation_id"]].add(session_time(turn["session_datetime"]).month)

    assert len(user) >= 6
    assert sum(chinese(c) for c in user) >= 3 and sum(not chinese(c) for c in user) >= 3
    assert all(count >= 900 for count in messages.values()), messages
    assert all(count >= 250_000 for count in tokens.values()), tokens
    assert all(len(spread) >= 6 for spread in months.values()), months


def test_it_gives_the_agent_replies_of_150_to_600_words_and_the_user_short_turns():
    user = users("agent_sessions")
    in_chinese = {c: chinese(c) for c in user}
    for turn in turns("agent_sessions"):
        words = reply_words(turn["text"], in_chinese=in_chinese[turn["conversation_id"]])
        if turn["speaker"] == user[turn["conversation_id"]]:
            assert words <= 40, turn
        else:
            assert 150 <= words <= 600, (turn["conversation_id"], turn["turn_id"], words)


def test_it_asks_120_questions_of_every_kind_in_both_languages():
    asked = queries("agent_sessions")
    in_chinese = {c: chinese(c) for c in users("agent_sessions")}
    by_kind = Counter((q["category"], in_chinese[q["conversation_id"]]) for q in asked)

    assert len(asked) >= 120
    assert {q["category"] for q in asked} == KINDS
    for kind in KINDS:
        assert by_kind[(kind, False)] >= 10 and by_kind[(kind, True)] >= 10, by_kind


def test_it_makes_the_newest_statement_the_evidence_of_a_changed_fact():
    said = turn_by_id("agent_sessions")
    changed = [q for q in queries("agent_sessions") if q["category"] == "changed"]
    for question in changed:
        conversation = question["conversation_id"]
        [newest] = [said[(conversation, turn)] for turn in question["evidence"]]
        older = [said[(conversation, turn)] for turn in question["superseded"]]
        assert older, question
        for turn in older:
            assert turn["session_index"] < newest["session_index"], question
            assert question["answer"] not in turn["text"], question
        assert question["answer"] in newest["text"], question
    assert all("superseded" not in q for q in queries("agent_sessions") if q not in changed)


def test_it_counts_in_a_month_only_the_mentions_of_that_month():
    said = turn_by_id("agent_sessions")
    counted = 0
    for question in queries("agent_sessions"):
        english = re.search(r"in (\w+)\?$", question["question"])
        named = re.search(r"我(\w+?)月份", question["question"])
        if question["category"] != "aggregation" or not (english or named):
            continue
        month = (
            ENGLISH_MONTHS.index(english.group(1)) + 1
            if english
            else CHINESE_MONTHS.index(named.group(1)) + 1
        )
        for turn in question["evidence"]:
            when = session_time(said[(question["conversation_id"], turn)]["session_datetime"])
            assert when.month == month, question
        assert first_number(question["answer"]) == len(question["evidence"]), question
        counted += 1
    assert counted >= 12


def test_it_names_a_counted_activity_in_user_turns_the_count_leaves_out():
    # The README's distractors: the activity of "How many times did I go climbing in March?"
    # comes up in turns that are no event of it in that month.
    said = turn_by_id("agent_sessions")
    user = users("agent_sessions")
    counted = 0
    for question in queries("agent_sessions"):
        english = re.search(r"did I (.+) in \w+\?$", question["question"])
        named = re.search(r"月份(.+)了几次", question["question"])
        if question["category"] != "aggregation" or not (english or named):
            continue
        activity = (english or named).group(1)
        conversation = question["conversation_id"]
        elsewhere = [
            turn
            for (other, turn_id), turn in said.items()
            if other == conversation
            and turn["speaker"] == user[conversation]
            and turn_id not in question["evidence"]
            and activity in turn["text"]
        ]
        assert len(elsewhere) >= 3, question
        counted += 1
    assert counted >= 12


def test_it_dates_an_event_on_its_session_day_or_the_day_before():
    said = turn_by_id("agent_sessions")
    dated = 0
    for question in queries("agent_sessions"):
        answer = question["answer"]
        match = re.fullmatch(r"(\d{4})年(\d+)月(\d+)日", answer)
        if question["category"] != "temporal" or not (match or answer[0].isdigit()):
            continue
        if answer.endswith(("days", "天")):
            continue
        day = (
            datetime(*(int(g) for g in match.groups()))
            if match
            else datetime.strptime(answer, "%d %B %Y")
        )
        [turn] = question["evidence"]
        session = session_time(said[(question["conversation_id"], turn)]["session_datetime"])
        assert (session.date() - day.date()).days in (0, 1), question
        dated += 1
    assert dated >= 12


# --- updates: facts that change over months (issue 34, its README) ---------------------------

UPDATES_SET = DATA / "updates"
UPDATE_KINDS = {"changed_once", "changed_twice", "unchanged"}


def said(phrase: str, text: str) -> bool:
    """A key phrase as bench/updates.py matches it (tested in tests/test_eval_updates.py)."""
    return phrase_in(phrase, text)


def test_it_generates_the_committed_updates_files(monkeypatch):
    spec = importlib.util.spec_from_file_location("generate", UPDATES_SET / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "generate", generate)  # its dataclasses look it up there
    spec.loader.exec_module(generate)

    made_turns, made_questions = generate.generate()

    assert made_turns == turns("updates")
    assert made_questions == queries("updates")


def test_it_gives_four_users_of_two_languages_months_of_sessions_and_long_replies():
    user = users("updates")
    messages = Counter(t["conversation_id"] for t in turns("updates"))
    months: dict[str, set[int]] = {c: set() for c in user}
    language = {q["conversation_id"]: q["language"] for q in queries("updates")}
    for turn in turns("updates"):
        months[turn["conversation_id"]].add(session_time(turn["session_datetime"]).month)
        chinese = language[turn["conversation_id"]] == "zh"
        assert bool(CJK.search(turn["text"])) == chinese, turn
        words = reply_words(turn["text"], in_chinese=chinese)
        if turn["speaker"] == user[turn["conversation_id"]]:
            assert words <= 40, turn
        else:
            assert 100 <= words <= 400, (turn["conversation_id"], turn["turn_id"], words)

    assert Counter(language.values()) == {"en": 3, "zh": 3}
    assert all(150 <= count <= 400 for count in messages.values()), messages
    assert all(len(spread) >= 6 for spread in months.values()), months


def test_it_asks_about_40_changed_facts_20_a_language_and_about_unchanged_ones():
    asked = queries("updates")
    by_kind = Counter((q["category"], q["language"]) for q in asked)
    changed = [q for q in asked if q["category"] != "unchanged"]

    assert {q["category"] for q in asked} == UPDATE_KINDS
    assert len(changed) >= 40
    for language in ("en", "zh"):
        assert by_kind[("changed_once", language)] + by_kind[("changed_twice", language)] >= 20
        assert by_kind[("changed_twice", language)] >= 5
        assert by_kind[("unchanged", language)] >= 5
    for question in asked:
        expected = {"changed_once": 1, "changed_twice": 2, "unchanged": 0}[question["category"]]
        assert len(question["superseded_values"]) == expected, question
        assert bool(question["superseded"]) == bool(expected), question
        assert bool(question["also"]) == (question["category"] == "unchanged"), question


def test_it_says_the_current_value_last_and_the_superseded_ones_before_it():
    text = turn_by_id("updates")
    position = {key: n for n, key in enumerate(text)}
    for question in queries("updates"):
        conversation = question["conversation_id"]
        [newest] = question["evidence"]
        current = question["answer"]
        assert said(current, text[(conversation, newest)]["text"]), question
        older = [text[(conversation, turn)]["text"] for turn in question["superseded"]]
        for turn in question["superseded"]:
            assert position[(conversation, turn)] < position[(conversation, newest)], question
        for value in question["superseded_values"]:
            assert any(said(value, words) for words in older), (value, question)
        assert not any(said(current, words) for words in older), question
        for turn in question["also"]:
            assert position[(conversation, turn)] > position[(conversation, newest)], question
            assert not said(current, text[(conversation, turn)]["text"]), question


def test_it_says_each_value_only_in_its_facts_turns_and_the_replies_after_them():
    user = users("updates")
    for question in queries("updates"):
        conversation = question["conversation_id"]
        own = set(question["evidence"] + question["superseded"] + question["also"])
        for value in [question["answer"], *question["superseded_values"]]:
            for turn in turns("updates"):
                if turn["conversation_id"] != conversation or not said(value, turn["text"]):
                    continue
                session, n = turn["turn_id"][1:].split(":")
                if turn["speaker"] != user[conversation]:
                    n = str(int(n) - 1)  # a reply says back what the turn before it said
                assert f"D{session}:{n}" in own, (value, turn["turn_id"], question)


def test_it_opens_no_other_turn_as_an_evidence_or_superseded_turn():
    by_conversation: dict[str, list[str]] = {}
    for turn in turns("updates"):
        by_conversation.setdefault(turn["conversation_id"], []).append(
            " ".join(turn["text"].split())
        )
    text = turn_by_id("updates")
    for question in queries("updates"):
        conversation = question["conversation_id"]
        for turn in question["evidence"] + question["superseded"]:
            own = " ".join(text[(conversation, turn)]["text"].split())
            keys = turn_keys(own)
            others = [t for t in by_conversation[conversation] if t != own]
            assert not any(key in other for key in keys for other in others), (turn, question)
