"""The attribute rule on statements written without seeing it (tests/data/attribute_wordings):
through the extractor, as consolidation reads a message, how many statements get their
attribute and how many of the others get one. The floors are the figures of
docs/EVALUATION.md ("Facts that change"): a change that catches fewer fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory import attributes
from memory.extraction import sentences, statements

ROWS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data/attribute_wordings/statements.jsonl").open()
]


def _kind(attribute: str | None) -> str | None:
    """The data names kinds: any weekday's activity, favourite music."""
    if attribute and attribute.startswith("a weekday's activity"):
        return "a weekday's activity"
    return attribute


def recognised(text: str) -> set[str]:
    return {
        kind
        for sentence in sentences(text)
        for _, statement in statements(sentence)
        if (kind := _kind(attributes.said(statement)))
    }


@pytest.mark.parametrize(("language", "recall", "others"), [("en", 69, 0), ("zh", 89, 1)])
def test_the_rule_recognises_statements_it_was_not_written_for(language, recall, others):
    rows = [row for row in ROWS if row["language"] == language]
    said = [row for row in rows if row["attribute"]]
    not_said = [row for row in rows if not row["attribute"]]

    assert (len(said), len(not_said)) == (100, 30)
    assert sum(row["attribute"] in recognised(row["text"]) for row in said) >= recall
    assert sum(bool(recognised(row["text"])) for row in not_said) <= others
