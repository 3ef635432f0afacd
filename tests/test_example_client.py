"""The examples (agent_client.py, mcp_client.py) run against a live server and do what the
README says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memory.auth import api_key_create
from memory.models import LongTermMemory, MainMessage
from subagents.models import SubagentMessage

pytestmark = pytest.mark.slow  # the example client runs in a process of its own

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db(transaction=True)
def test_the_example_client_stores_a_conversation_and_a_subagent_run(live_server):
    _, key = api_key_create(agent_id="demo")
    env = {**os.environ, "ORCA_URL": live_server.url, "ORCA_API_KEY": key}

    result = subprocess.run(
        [sys.executable, "examples/agent_client.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert "def add(a, b)" in result.stdout
    assert "Thinking: def add..." in result.stdout
    assert "Context for the next LLM call:" in result.stdout
    assert "working: " in result.stdout and "long_term: " in result.stdout
    assert MainMessage.objects.filter(agent_id="demo", role="tool").count() == 1
    assert SubagentMessage.objects.filter(agent_name="coder").count() == 2
    session = MainMessage.objects.filter(agent_id="demo").first().session_id
    assert list(
        MainMessage.objects.filter(session_id=session).order_by("id").values_list("role", flat=True)
    ) == ["user", "user", "assistant", "tool", "assistant"]
    # The first two came in one batch call, in their order.
    assert MainMessage.objects.filter(session_id=session).order_by("id").first().msg_type == (
        "preference"
    )


@pytest.mark.django_db(transaction=True)
def test_the_mcp_example_stores_a_conversation_and_prints_its_context(live_server):
    _, key = api_key_create(agent_id="demo")
    env = {**os.environ, "ORCA_URL": live_server.url, "ORCA_API_KEY": key}

    result = subprocess.run(
        [sys.executable, "examples/mcp_client.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert "Tools: store_message, get_context, search, get_message, remember" in result.stdout
    assert "Context for the next LLM call:" in result.stdout
    assert "The user prefers short answers." in result.stdout  # the memory, in the context
    assert "working: 3 items" in result.stdout
    assert "'def add(a, b):\\n    return a + b'" in result.stdout.split("Search (lexical):")[1]
    stored = MainMessage.objects.filter(agent_id="demo").order_by("id")
    assert [m.role for m in stored] == ["user", "user", "assistant"]
    assert LongTermMemory.objects.get(agent_id="demo").content == "The user prefers short answers."


def test_the_mcp_example_says_where_no_server_answers():
    with socket.socket() as unused:  # a port nothing listens on once it is closed
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    env = {**os.environ, "ORCA_URL": url, "ORCA_API_KEY": "orca_x"}

    result = subprocess.run(
        [sys.executable, "examples/mcp_client.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert f"No orca-memory server answers at {url}" in result.stderr
    assert "BIND=host:port" in result.stderr and "Traceback" not in result.stderr
