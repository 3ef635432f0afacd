"""What `eval_locomo` counts and prints. The context target finds an evidence turn by its whole
text, its first sentence (20+ characters) or its first 80 characters, whitespace-normalised
(issue 33), so that a reply the context trims to its opening still counts; every report has
a table per kind of question."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from bench import evaluation
from bench.evaluation import evaluate_context, turn_present, whitespace_normalised
from bench.management.commands.eval_locomo import kind_table
from memory.models import MainMessage

REPLY = (
    "Happy to help with a budget for groceries.\n\n"
    "Track spending for one month before setting a budget, so the budget is realistic. "
    "Batch-cooking grains on Sunday saves a lot of time.\n\n"
    "- Review subscriptions every few months.\n- Keep a few pantry staples around."
)
ZH_REPLY = (
    "关于收纳衣柜的问题，我来帮你把思路完整地梳理一下，先从最常用的衣服开始说起。\n\n"
    "用透明收纳盒并贴上标签，东西放进去以后才找得到。断舍离一次只整理一个抽屉。"
)


def present(turn: str, sent: str) -> bool:
    return turn_present(turn, whitespace_normalised(sent))


def test_it_finds_a_turn_by_its_whole_text_across_line_breaks():
    assert present(REPLY, "[2026-03-07] assistant: " + REPLY.replace("\n\n", "\n"))


def test_it_finds_a_reply_trimmed_to_its_first_sentence_and_what_matters():
    trimmed = (
        "assistant (message 42, trimmed): Happy to help with a budget for groceries. … "
        "Batch-cooking grains on Sunday saves a lot of time. …"
    )
    assert present(REPLY, trimmed)


def test_it_finds_a_reply_trimmed_to_its_first_80_characters():
    reply = REPLY.replace("groceries.", "groceries,")  # its first sentence is over 80 long
    assert present(reply, whitespace_normalised(reply)[:80] + "…")


def test_it_finds_a_chinese_reply_by_its_first_sentence():
    assert present(
        ZH_REPLY,
        "助手：关于收纳衣柜的问题，我来帮你把思路完整地梳理一下，先从最常用的衣服开始说起。……",
    )


def test_it_does_not_take_a_short_first_sentence_or_a_later_one_for_the_turn():
    reply = "Sure thing! " + REPLY
    assert not present(reply, "Sure thing! Something else entirely, about another topic.")
    assert not present(REPLY, "Track spending for one month before setting a budget.")
    assert not present(ZH_REPLY, "用透明收纳盒并贴上标签，东西放进去以后才找得到。")


@dataclass
class FakeContext:
    """What evaluate_context reads of a context: the messages sent."""

    messages: list[dict[str, str]]
    layers: dict[str, Any] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    budget: int = 1000


@pytest.mark.django_db
def test_the_context_target_counts_a_reply_the_context_trimmed(tmp_path, monkeypatch):
    session = {"session_index": 1, "session_datetime": "8:30 pm on 2 February, 2026"}
    turns = [
        {"turn_id": "D1:1", "speaker": "Ana", "text": "How do I make a budget for groceries?"},
        {"turn_id": "D1:2", "speaker": "Assistant", "text": REPLY},
        {
            "turn_id": "D1:3",
            "speaker": "Ana",
            "text": "Thanks, and what about a budget for a wedding?",
        },
    ]
    lines = [{"conversation_id": "c1", "session_id": "c1/session_1", **session, **t} for t in turns]
    (tmp_path / "conversations.jsonl").write_text("\n".join(json.dumps(t) for t in lines))
    questions = [
        {"qa_index": 0, "question": "What did you say about groceries?", "evidence": ["D1:2"]},
        {"qa_index": 1, "question": "What did I ask about a wedding?", "evidence": ["D1:3"]},
    ]
    (tmp_path / "queries.jsonl").write_text(
        "\n".join(
            json.dumps(q | {"conversation_id": "c1", "answer": "x", "category": kind})
            for q, kind in zip(questions, ["assistant", "fact"], strict=True)
        )
    )
    sent = "assistant (trimmed): Happy to help with a budget for groceries. … realistic."
    # D1:3's memory, its source set once the turns are stored
    wedding = SimpleNamespace(content="Ana plans a wedding.", source_ids=())

    def context(**_: Any) -> FakeContext:
        layers = {"long_term": SimpleNamespace(items=[wedding])}
        return FakeContext([{"role": "user", "content": sent}], layers)

    monkeypatch.setattr(evaluation, "context_build", context)
    real_add = evaluation.message_add

    def add(**fields: Any) -> MainMessage:
        stored = real_add(**fields)
        if (stored.metadata or {}).get("turn_id") == "D1:3":
            wedding.source_ids = (stored.pk,)
        return stored

    monkeypatch.setattr(evaluation, "message_add", add)
    evaluation.load_conversations(tmp_path / "conversations.jsonl")

    report = evaluate_context(tmp_path, window=2048, same_session=False)

    data = report.as_dict()
    assert data["by_category"] == {"assistant": 1.0, "fact": 0.0}
    # the wedding turn is in the context only through a memory made from it
    assert data["by_memory_by_category"] == {"assistant": 1.0, "fact": 1.0}
    assert data["category_queries"] == {"assistant": 1, "fact": 1}


def test_it_tabulates_the_context_by_the_kinds_the_set_names_then_all():
    data = {
        "target": "context",
        "queries": 4,
        "evidence_recall": 0.625,
        "evidence_by_memory": 0.75,
        "answer_present": 0.25,
        "by_category": {"aggregation": 0.5, "assistant": 1.0},
        "by_memory_by_category": {"aggregation": 0.667, "assistant": 1.0},
        "answer_by_category": {"aggregation": 0.0, "assistant": 1.0},
        "category_queries": {"aggregation": 3, "assistant": 1},
    }

    lines = [line.split() for line in kind_table(data)]

    assert lines == [
        ["kind", "questions", "evidence", "+memory", "answer"],
        ["aggregation", "3", "0.500", "0.667", "0.000"],
        ["assistant", "1", "1.000", "1.000", "1.000"],
        ["all", "4", "0.625", "0.750", "0.250"],
    ]


def test_it_tabulates_search_recall_at_each_k_by_kind():
    data = {
        "target": "search",
        "queries": 3,
        "recall": {"5": 0.5, "10": 0.75},
        "by_category": {"1": {"5": 0.25, "10": 0.5}, "2": {"5": 1.0, "10": 1.0}},
        "category_queries": {"1": 2, "2": 1},
    }

    lines = [line.split() for line in kind_table(data)]

    assert lines == [
        ["kind", "questions", "@5", "@10"],
        ["1", "2", "0.250", "0.500"],
        ["2", "1", "1.000", "1.000"],
        ["all", "3", "0.500", "0.750"],
    ]
