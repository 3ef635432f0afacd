"""`manage.py convert_locomo`: LoCoMo's locomo10.json into the format eval_locomo reads.

The item below is written by hand in locomo10.json's shape (no LoCoMo text). Where the
evaluation folder `../shared/data/locomo` exists, its files are turned back into that shape
and converted again: the result must be the same files, byte for byte."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.test_eval_locomo import LOCOMO

ITEM = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Later."}],
        "session_10_date_time": "9:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "I moved to Porto."},
            {
                "speaker": "Bo",
                "dia_id": "D2:2",
                "text": "Look!",
                "img_url": ["https://example.invalid/a.jpg"],
                "blip_caption": "a photo of a tram",
            },
        ],
        "session_2_date_time": "1:56 pm on 8 May, 2023",
    },
    "qa": [
        {"question": "Where did Ana move?", "answer": "Porto", "evidence": ["D2:1"], "category": 4},
        {"question": "Did Bo move?", "adversarial_answer": "No", "evidence": [], "category": 5},
        {"question": "What year?", "answer": 2023, "evidence": ["D2:1"], "category": 2},
    ],
}


def convert(tmp_path: Path, items: Any, *args: str) -> Path:
    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps(items), encoding="utf-8")
    out = tmp_path / "out"
    call_command("convert_locomo", str(source), str(out), *args)
    return out


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_turns_in_session_order_with_captions_and_questions_with_answers(tmp_path):
    out = convert(tmp_path, [ITEM])

    messages = rows(out / "conversations.jsonl")
    assert [m["turn_id"] for m in messages] == ["D2:1", "D2:2", "D10:1"]
    assert messages[1] == {
        "conversation_id": "conv-x",
        "session_id": "conv-x/session_2",
        "session_index": 2,
        "session_datetime": "1:56 pm on 8 May, 2023",
        "turn_id": "D2:2",
        "speaker": "Bo",
        "text": "Look! [image: a photo of a tram]",
    }
    queries = rows(out / "queries.jsonl")
    assert [(q["qa_index"], q["answer"]) for q in queries] == [(0, "Porto"), (2, "2023")]


def test_conversations_chosen_and_bad_input_refused(tmp_path):
    other = {**ITEM, "sample_id": "conv-y"}
    out = convert(tmp_path, [ITEM, other], "--conversations", "conv-y")
    assert {m["conversation_id"] for m in rows(out / "conversations.jsonl")} == {"conv-y"}

    with pytest.raises(CommandError, match="not in .*conv-z"):
        convert(tmp_path, [ITEM], "--conversations", "conv-z")
    with pytest.raises(CommandError, match="is not LoCoMo's locomo10.json"):
        convert(tmp_path, {"data": []})
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(CommandError, match="cannot read"):
        call_command("convert_locomo", str(tmp_path / "broken.json"), str(tmp_path / "o"))


def _as_locomo10(folder: Path) -> list[dict[str, Any]]:
    """The evaluation folder turned back into locomo10.json's shape (left-out questions as
    adversarial ones in their places)."""
    items: dict[str, dict[str, Any]] = {}
    for m in rows(folder / "conversations.jsonl"):
        item = items.setdefault(m["conversation_id"], {"conversation": {}, "qa": []})
        sessions = item["conversation"]
        turn: dict[str, Any] = {"speaker": m["speaker"], "dia_id": m["turn_id"], "text": m["text"]}
        if image := re.fullmatch(r"(.*) \[image: (.*)\]", m["text"], re.DOTALL):
            turn["text"], turn["blip_caption"] = image.groups()
        sessions.setdefault(f"session_{m['session_index']}", []).append(turn)
        sessions[f"session_{m['session_index']}_date_time"] = m["session_datetime"]
    questions: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for q in rows(folder / "queries.jsonl"):
        questions[q["conversation_id"]][q["qa_index"]] = {
            "question": q["question"],
            "answer": q["answer"],
            "evidence": q["evidence"],
            "category": q["category"],
        }
    for sample_id, item in items.items():
        asked = questions[sample_id]
        item["sample_id"] = sample_id
        item["qa"] = [
            asked.get(i, {"question": "?", "adversarial_answer": "-", "category": 5})
            for i in range(max(asked) + 1)
        ]
    return list(items.values())


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_the_evaluation_folder_is_what_the_converter_makes(tmp_path):
    out = convert(tmp_path, _as_locomo10(LOCOMO))
    for name in ("conversations.jsonl", "queries.jsonl"):
        assert (out / name).read_bytes() == (LOCOMO / name).read_bytes(), name
