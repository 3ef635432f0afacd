"""eval_locomo runs on the LoCoMo data in ../shared (skipped, saying so, where it is absent)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT, manage

pytestmark = pytest.mark.slow  # each test runs manage.py eval_locomo in a process

LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


def sample(folder: Path, conversation: str = "conv-26", messages: int = 120) -> Path:
    """The first messages of one conversation and its questions answered within them."""
    turns = [
        json.loads(line)
        for line in (LOCOMO / "conversations.jsonl").read_text("utf-8").splitlines()
        if json.loads(line)["conversation_id"] == conversation
    ][:messages]
    kept = {turn["turn_id"] for turn in turns}
    questions = [
        line
        for line in (LOCOMO / "queries.jsonl").read_text("utf-8").splitlines()
        if json.loads(line)["conversation_id"] == conversation
        and json.loads(line)["evidence"]
        and set(json.loads(line)["evidence"]) <= kept
    ]
    folder.mkdir()
    (folder / "conversations.jsonl").write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(questions) + "\n")
    return folder


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return manage(home, "eval_locomo", *args, check=False)


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_it_reports_recall_per_category_as_one_json_line(tmp_path):
    data = sample(tmp_path / "locomo")

    result = run(str(data), "--mode", "lexical", "--k", "5", "10", "--json", home=tmp_path / "home")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["mode"] == "lexical"
    assert report["queries"] > 5
    assert set(report["recall"]) == {"5", "10"}
    assert 0.3 < report["recall"]["10"] <= 1
    assert report["recall"]["5"] <= report["recall"]["10"]
    assert report["by_category"] and report["latency_ms"]["p95"] > 0
    # It ran in a temporary database: the configured one was never created.
    assert not (tmp_path / "home" / "data" / "orca.db").exists()


def test_it_explains_a_missing_folder(tmp_path):
    result = run(str(tmp_path / "nowhere"), home=tmp_path / "home")
    assert result.returncode != 0
    assert "conversations.jsonl does not exist" in result.stderr


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_the_context_target_measures_what_a_new_session_receives(tmp_path):
    data = sample(tmp_path / "locomo")

    result = run(
        str(data), "--target", "context", "--window", "2048", "--json", home=tmp_path / "home"
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["target"], report["model_window"], report["budget"]) == ("context", 2048, 1228)
    assert report["queries"] > 5 and report["same_session"] is False
    assert 0.5 < report["evidence_recall"] <= 1
    assert 0 < report["tokens_used_mean"] <= report["budget"]
    assert report["duplicate_token_share"] < 0.05
    assert "evidence recall" in result.stdout


@pytest.mark.skipif(not LOCOMO.is_dir(), reason=f"LoCoMo data not found at {LOCOMO}")
def test_search_with_the_question_stored_first(tmp_path):
    data = sample(tmp_path / "locomo")

    result = run(
        str(data), "--mode", "lexical", "--store-question", "--json", home=tmp_path / "home"
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["store_question"] is True and report["recall"]["10"] > 0.3
    assert "question stored" in result.stdout


def test_it_prints_a_table_per_kind_of_question_for_our_sets(tmp_path):
    kinds = {"fact", "changed", "assistant", "temporal", "recommend", "aggregation"}

    result = run(
        str(ROOT / "tests" / "data" / "agent_style"),
        "--mode",
        "lexical",
        "--json",
        home=tmp_path / "home",
    )

    assert result.returncode == 0, result.stderr
    *printed, last = result.stdout.strip().splitlines()
    report = json.loads(last)
    rows = {line.split()[0]: line.split()[1:] for line in printed if line.startswith("  ")}
    assert rows["kind"] == ["questions", "@5", "@10"]
    assert set(report["category_queries"]) == kinds
    assert sum(report["category_queries"].values()) == report["queries"] == 101
    for kind in kinds:
        recall = report["by_category"][kind]
        assert rows[kind] == [
            str(report["category_queries"][kind]),
            *(f"{recall[k]:.3f}" for k in ("5", "10")),
        ]
    assert rows["all"][0] == "101"


def test_the_updates_target_judges_each_changed_fact_in_a_new_sessions_context(tmp_path):
    # The first 12 sessions of one user of the updates set, and the questions answered there.
    updates = ROOT / "tests" / "data" / "updates"
    turns = [
        line
        for line in (updates / "conversations.jsonl").read_text("utf-8").splitlines()
        if json.loads(line)["conversation_id"] == "up-01"
        and json.loads(line)["session_index"] <= 12
    ]
    kept = {json.loads(line)["turn_id"] for line in turns}
    questions = [
        line
        for line in (updates / "queries.jsonl").read_text("utf-8").splitlines()
        if json.loads(line)["conversation_id"] == "up-01"
        and set(json.loads(line)["evidence"] + json.loads(line)["superseded"]) <= kept
    ]
    data = tmp_path / "updates"
    data.mkdir()
    (data / "conversations.jsonl").write_text("\n".join(turns) + "\n")
    (data / "queries.jsonl").write_text("\n".join(questions) + "\n")

    result = run(
        str(data), "--target", "updates", "--window", "2048", "--json", home=tmp_path / "home"
    )

    assert result.returncode == 0, result.stderr
    *printed, last = result.stdout.strip().splitlines()
    report = json.loads(last)
    assert (report["target"], report["model_window"], report["budget"]) == ("updates", 2048, 1228)
    assert report["questions"] == len(questions) == len(report["per_question"]) >= 4
    assert (
        {"changed_once", "unchanged"}
        <= set(report["by_kind"])
        <= {
            "changed_once",
            "changed_twice",
            "unchanged",
        }
    )
    assert set(report["by_language"]) == {"en"}
    assert 0 < report["current_value_rate"] <= 1
    stale = sum(bool(row["stale"]) for row in report["per_question"])
    assert report["stale_as_current"] == stale
    rows = {line.split()[0]: line.split()[1:] for line in printed if line.startswith("  ")}
    assert rows["all"] == [
        str(report["questions"]),
        f"{report['current_value_rate']:.3f}",
        str(report["stale_as_current"]),
    ]
