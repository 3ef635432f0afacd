"""bench_embedding: the worker's embedding rate beside the model's, with the local model."""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT, manage

pytestmark = pytest.mark.slow  # manage.py bench_embedding in a process, loading the model


def test_it_reports_the_worker_and_the_model_for_each_batch_size(tmp_path):
    result = manage(
        tmp_path,
        "bench_embedding",
        str(ROOT / "tests" / "data" / "zh_multisession"),
        "--messages",
        "24",
        "--batch-sizes",
        "5",
        "8",
        "--runs",
        "1",
        ORCA_EMBEDDING_PROVIDER="local",
    )

    assert "24 LoCoMo messages, local/minilm-use-multilingual (896 dims)" in result.stdout
    rows = re.findall(r"^ +(\d+) \| ([\d,]+) \| ([\d,]+) \| (\d+)%$", result.stdout, re.M)
    assert [row[0] for row in rows] == ["5", "8"]  # every message embedded in each run


def test_a_stand_in_for_a_remote_provider_is_reached_through_the_real_client(tmp_path):
    # 20 ms a call of 5 texts: the client alone cannot embed more than 250 a second.
    result = manage(
        tmp_path,
        "bench_embedding",
        str(ROOT / "tests" / "data" / "zh_multisession"),
        "--messages",
        "24",
        "--runs",
        "1",
        "--stub-latency-ms",
        "20",
    )

    assert "20 ms a call" in result.stdout
    assert "24 LoCoMo messages, openai/stub-embedding (1024 dims)" in result.stdout
    ((size, model, worker),) = re.findall(
        r"^ +(\d+) \| ([\d,]+) \| ([\d,]+) \| \d+%$", result.stdout, re.M
    )
    assert size == "5"  # the remote providers' batch
    assert 0 < int(worker) <= int(model) * 1.5 and int(model) <= 250


def test_it_compares_bundled_models_on_short_and_agent_style_texts(tmp_path):
    result = manage(
        tmp_path,
        "bench_embedding",
        str(ROOT / "tests" / "data" / "agent_style"),
        "--messages",
        "40",
        "--runs",
        "1",
        "--long-texts",
        "8",
        "--models",
        "all-MiniLM-L6-v2",
        "universal-sentence-encoder-multilingual",
    )

    assert re.search(r"^40 messages and 8 texts of 300 words", result.stdout, re.M)
    rows = re.findall(
        r"^([\w-]+) \| [\d.]+ \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|", result.stdout, re.M
    )
    assert [name for name, _, _ in rows] == [
        "all-MiniLM-L6-v2",
        "universal-sentence-encoder-multilingual",
    ]
    assert all(float(short) > float(long) > 0 for _, short, long in rows)
