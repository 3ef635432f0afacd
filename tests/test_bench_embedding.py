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

    assert "24 LoCoMo messages, local/all-MiniLM-L6-v2 (384 dims)" in result.stdout
    rows = re.findall(r"^ +(\d+) \| ([\d,]+) \| ([\d,]+) \| (\d+)%$", result.stdout, re.M)
    assert [row[0] for row in rows] == ["5", "8"]  # every message embedded in each run
