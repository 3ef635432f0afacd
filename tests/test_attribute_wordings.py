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

FOLDER = Path(__file__).parent / "data/attribute_wordings"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FOLDER / name).open()]


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


@pytest.mark.parametrize(
    ("name", "language", "sizes", "recall", "others"),
    [
        ("statements.jsonl", "en", (100, 30), 69, 0),
        ("statements.jsonl", "zh", (100, 30), 88, 0),
        ("heldout.jsonl", "en", (80, 40), 44, 0),
        ("heldout.jsonl", "zh", (80, 40), 54, 0),
    ],
)
def test_the_rule_recognises_statements_it_was_not_written_for(
    name, language, sizes, recall, others
):
    written = [row for row in rows(name) if row["language"] == language]
    said = [row for row in written if row["attribute"]]
    not_said = [row for row in written if not row["attribute"]]

    assert (len(said), len(not_said)) == sizes
    assert sum(row["attribute"] in recognised(row["text"]) for row in said) >= recall
    assert sum(bool(recognised(row["text"])) for row in not_said) <= others
