"""`make loadtest` in small: concurrent agents over HTTP against gunicorn and the task worker.

The full run (8 agents x 500 messages) is `make loadtest`; this one keeps its guarantees in
`make test`: every message stored exactly once, no 5xx, no "database is locked".
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import manage

pytestmark = pytest.mark.slow  # gunicorn, the worker and the load test's own process


def test_concurrent_agents_over_http_store_every_message_exactly_once(tmp_path):
    result = manage(
        tmp_path,
        "loadtest",
        "--clients",
        "4",
        "--messages",
        "40",
        "--context-every",
        "5",
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "stored per agent: load-0=40 load-1=40 load-2=40 load-3=40" in result.stdout
    assert "5xx or errors: 0; 'database is locked' in logs: 0" in result.stdout
    # The worker's embedding during the load, counted in the database after the stop.
    embedded = re.search(
        r"messages embedded by the stop: (\d+) \(\d+/s of the load\)", result.stdout
    )
    assert embedded is not None and 0 <= int(embedded.group(1)) <= 160, result.stdout
    # Where the cores went: each process group's CPU for the load, the clients' included.
    cpu = re.search(
        r"CPU per message: server ([\d.]+) ms, task worker ([\d.]+) ms, clients ([\d.]+) ms",
        result.stdout,
    )
    assert cpu is not None, result.stdout
    server, _, clients = map(float, cpu.groups())  # the worker may not have run yet
    assert server > 0 and clients > 0, result.stdout


def test_batches_and_single_posts_interleaved_from_several_clients_lose_nothing(tmp_path):
    # Clients 0 and 2 send batches of 15 (the last one of 10), 1 and 3 one message per POST;
    # the vectors come from the stand-in for a remote provider (bench.stub_provider).
    result = manage(
        tmp_path,
        "loadtest",
        "--clients",
        "4",
        "--messages",
        "40",
        "--batch",
        "15",
        "--mixed",
        "--context-every",
        "5",
        "--stub-latency-ms",
        "10",
        check=False,
        # An operator's own provider: the stand-in's variables must win over it.
        EMBEDDING_PROVIDER="none",
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "half the clients in batches of 15" in result.stdout
    assert "embedding provider openai" in result.stdout  # the servers were pointed at it
    assert "stored per agent: load-0=40 load-1=40 load-2=40 load-3=40" in result.stdout
    assert "5xx or errors: 0; 'database is locked' in logs: 0" in result.stdout
