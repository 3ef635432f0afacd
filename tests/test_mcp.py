"""The MCP server at /mcp, driven over Streamable HTTP by the official SDK's own client.

Most tests run the site in pytest-django's live server (a thread: they run on PostgreSQL
too); the slow one starts the Procfile's gunicorn, as `make run` does, with two workers.
Requests the transport refuses, sent raw, go through Django's test client (`send`); the
stdio tests start `manage.py mcp_stdio`.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import hypothesis
import pytest
from django.conf import settings
from django.db import OperationalError, connection
from django.http import HttpResponse
from django.test import Client as DjangoClient
from django.utils import timezone
from hypothesis import strategies as st
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from memory.auth import api_key_create, api_key_revoke
from memory.memories import memory_supersede
from memory.models import ConsolidationRun, LongTermMemory, LongTermMemoryHistory, MainMessage
from tests.helpers import ROOT, database_url, last_line, manage, service_env
from tests.test_access_log import free_port, procfile_web_command, wait_for
from tests.test_consolidation import Clock
from tests.test_hostile_input import MCP_CASES

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"

TOOLS = {
    "store_message": {"session_id", "role", "content"},
    "get_context": {"session_id"},
    "search": {"query"},
    "get_message": {"message_id"},
    "remember": {"content", "memory_type"},
    "list_memories": set(),
    "update_memory": {"memory_id"},
    "expire_memory": {"memory_id"},
    "end_session": {"session_id"},
    "forget": set(),
}


def with_client[T](
    base_url: str, key: str, steps: Callable[[Client], Awaitable[T]], mode: str = "auto"
) -> T:
    """Run `steps` with the SDK's client connected to base_url/mcp with the key; `mode`
    "auto" speaks the stateless protocol of 2026-07-28, "legacy" the initialize handshake
    of the earlier versions most runtimes still use."""

    async def run() -> T:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with http, Client(transport, mode=mode) as client:
            return await steps(client)

    return anyio.run(run)


def call(base_url: str, key: str, tool: str, **arguments: Any) -> CallToolResult:
    return with_client(base_url, key, lambda client: client.call_tool(tool, arguments))


def result(answer: CallToolResult) -> Any:
    assert not answer.is_error, answer.content
    return answer.structured_content


def error(answer: CallToolResult) -> str:
    assert answer.is_error and answer.structured_content is None
    return answer.content[0].text


def post(base_url: str, body: bytes, key: str | None = None, **headers: str) -> httpx.Response:
    """One raw HTTP request to /mcp, as a client that is not the SDK's would send it."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{base_url}/mcp", content=body, headers={**sent, **headers}, timeout=30)


def rpc(method: str, params: dict[str, Any] | None = None, id_: Any = 1) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}
    ).encode()


def send(
    client: DjangoClient, body: bytes, key: str | None, content_type: str = JSON, **headers: str
) -> HttpResponse:
    """One request to /mcp through Django's test client, in the test's own thread."""
    sent = {"Accept": "application/json, text/event-stream", **headers}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    return client.generic("POST", "/mcp", data=body, content_type=content_type, headers=sent)


def jsonrpc_error(response: HttpResponse) -> dict[str, Any]:
    """The error of a JSON-RPC error answered as JSON, after checking it is one."""
    assert response["Content-Type"].startswith(JSON), response.content[:200]
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"} and body["jsonrpc"] == "2.0", body
    assert body["id"] is None
    return body["error"]


@pytest.fixture
def key() -> str:
    return api_key_create(agent_id="agent-a")[1]


@pytest.fixture
def other_key() -> str:
    return api_key_create(agent_id="agent-b")[1]


ROLES = ["user", "assistant", "system", "tool"]
MEMORY_TYPES = ["preference", "fact", "decision", "project"]
# The arguments that take one of a few values, and the values each tool's schema must list.
CHOICES = {
    ("store_message", "role"): ROLES,
    ("store_message", "msg_type"): ["normal", "fact", "todo", "decision", "preference", "error"],
    ("search", "mode"): ["hybrid", "lexical", "vector"],
    ("search", "role"): ROLES,
    ("remember", "memory_type"): MEMORY_TYPES,
    ("list_memories", "memory_type"): MEMORY_TYPES,
    ("list_memories", "state"): ["active", "all"],
    ("update_memory", "memory_type"): MEMORY_TYPES,
}


def choices(schema: dict[str, Any]) -> list[str] | None:
    """The values a JSON schema's enum allows, an optional argument's (in `anyOf`) too."""
    for branch in [schema, *schema.get("anyOf", [])]:
        if "enum" in branch:
            return branch["enum"]
    return None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_it_lists_the_tools_an_agent_needs_with_their_arguments(live_server, key, mode):
    listed = with_client(live_server.url, key, lambda client: client.list_tools(), mode)

    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == set(TOOLS)
    for name, required in TOOLS.items():
        schema = tools[name].input_schema
        assert set(schema.get("required", [])) == required, name
        assert tools[name].description and "\n" not in tools[name].description
        assert all(field.get("description") for field in schema["properties"].values()), name
    advertised = {
        (name, argument): choices(tools[name].input_schema["properties"][argument])
        for name, argument in CHOICES
    }
    assert advertised == CHOICES
    assert tools["search"].annotations.read_only_hint is True
    assert tools["get_message"].annotations.read_only_hint is True


def test_it_stores_messages_in_two_sessions_and_gives_their_context_and_search(live_server, key):
    url = live_server.url
    tea = result(
        call(url, key, "store_message", session_id="s-1", role="user", content="我喜欢绿茶。")
    )
    call(url, key, "store_message", session_id="s-1", role="assistant", content="好的，记住了。")
    call(
        url,
        key,
        "store_message",
        session_id="s-2",
        role="user",
        content="Deploy the service on Friday.",
        msg_type="decision",
        metadata={"source": "chat", "n": [1, 2.5]},
    )

    context = result(
        call(url, key, "get_context", session_id="s-1", query="绿茶", model_window=4096)
    )
    found = result(call(url, key, "search", query="Friday deploy", mode="lexical", k=5))
    in_session = result(call(url, key, "search", query="绿茶", session_id="s-2"))

    assert tea["session_id"] == "s-1" and tea["role"] == "user" and tea["token_count"] > 0
    assert context["messages"][-2:] == [
        {"role": "user", "content": "我喜欢绿茶。"},
        {"role": "assistant", "content": "好的，记住了。"},
    ]
    assert "of 2457 tokens used (60% of a 4096-token window)" in context["explanation"]
    assert "working: 2 items" in context["explanation"]
    assert found["mode"] == "lexical"
    assert [hit["message"]["content"] for hit in found["hits"]] == ["Deploy the service on Friday."]
    assert in_session["hits"] == []
    stored = MainMessage.objects.filter(agent_id="agent-a").order_by("id")
    assert [(m.session_id, m.role, m.msg_type) for m in stored] == [
        ("s-1", "user", "normal"),
        ("s-1", "assistant", "normal"),
        ("s-2", "user", "decision"),
    ]
    assert stored[2].metadata == {"source": "chat", "n": [1, 2.5]}
    assert stored[0].pk == tea["id"]


def to_the_millisecond(moment: str) -> str:
    return datetime.fromisoformat(moment).isoformat(timespec="milliseconds")


def test_it_gives_one_message_whole_as_the_api_does(live_server, key, other_key, api):
    """get_message: what a recalled line's #id names, as `GET /messages/{id}` answers it;
    another agent's message, a sub-agent's reply and an id out of range are refused."""
    url = live_server.url
    content = "We camped at Lake Tahoe. " * 200 + "湖边很安静。"
    stored = result(call(url, key, "store_message", session_id="s-1", role="user", content=content))
    parent = api.post("/sessions/s-1/messages", {"role": "assistant", "content": "ask r"}).json()
    replies = [
        api.post(
            f"/messages/{parent['id']}/subagent",
            {"agent_name": "r", "role": "assistant", "content": f"notes {n}"},
        ).json()
        for n in range(3)
    ]
    # Three replies, two main messages: one reply's id is no main message's.
    reply = next(r for r in replies if r["id"] not in (stored["id"], parent["id"]))

    found = result(call(url, key, "get_message", message_id=stored["id"]))
    refused = [
        error(call(url, other_key, "get_message", message_id=stored["id"])),
        error(call(url, key, "get_message", message_id=reply["id"])),
        error(call(url, key, "get_message", message_id=2**63)),
    ]

    by_api = api.get(f"/messages/{stored['id']}").json()
    assert found == stored
    # The same answer (the API writes a time to the millisecond, pydantic to the microsecond).
    assert {**found, "timestamp": None} == {**by_api, "timestamp": None}
    assert to_the_millisecond(found["timestamp"]) == to_the_millisecond(by_api["timestamp"])
    assert found["content"] == content and found["session_id"] == "s-1"
    assert refused[0] == refused[1] == "Error executing tool get_message: Not Found"
    assert refused[2] == (
        "Error executing tool get_message: message_id: Input should be less than or equal to "
        f"{2**63 - 1}"
    )


def test_it_remembers_updates_and_expires_a_memory_keeping_its_history(live_server, key):
    url = live_server.url
    kept = result(
        call(url, key, "remember", content="The user prefers green tea.", memory_type="preference")
    )
    changed = result(
        call(
            url,
            key,
            "update_memory",
            memory_id=kept["id"],
            content="The user prefers oolong.",
            confidence=0.9,
        )
    )
    listed = result(call(url, key, "list_memories", query="oolong"))
    expired = result(call(url, key, "expire_memory", memory_id=kept["id"]))
    active = result(call(url, key, "list_memories"))
    every = result(call(url, key, "list_memories", state="all", memory_type="preference"))

    assert kept["confidence"] == 0.5 and kept["curated"] is True and kept["expired"] is False
    assert changed["content"] == "The user prefers oolong." and changed["confidence"] == 0.9
    assert [m["id"] for m in listed["memories"]] == [kept["id"]] and listed["count"] == 1
    assert expired["expired"] is True and expired["expires_at"] is not None
    assert active == {"count": 0, "memories": []}
    assert every["count"] == 1 and every["memories"][0]["expired"] is True
    memory = LongTermMemory.objects.get(pk=kept["id"])
    assert (memory.agent_id, memory.content, memory.confidence) == (
        "agent-a",
        "The user prefers oolong.",
        0.9,
    )
    history = LongTermMemoryHistory.objects.filter(memory_id=memory.pk).order_by("id")
    assert [(h.action, h.actor) for h in history] == [
        ("create", "mcp"),
        ("update", "mcp"),
        ("expire", "mcp"),
    ]
    assert history[1].old_content == "The user prefers green tea."


def test_list_memories_shows_current_ones_and_superseded_ones_only_with_state_all(live_server, key):
    url = live_server.url
    paris = result(call(url, key, "remember", content="I live in Paris", memory_type="fact"))
    berlin = result(call(url, key, "remember", content="I moved to Berlin", memory_type="fact"))
    memory_supersede(
        LongTermMemory.objects.get(pk=paris["id"]),
        LongTermMemory.objects.get(pk=berlin["id"]),
        actor="consolidation",
    )

    active = result(call(url, key, "list_memories"))
    found = result(call(url, key, "list_memories", query="Paris"))
    every = result(call(url, key, "list_memories", state="all"))

    assert [m["id"] for m in active["memories"]] == [berlin["id"]] and active["count"] == 1
    assert found == {"count": 0, "memories": []}
    assert {m["id"]: m["superseded_by"] for m in every["memories"]} == {
        berlin["id"]: None,
        paris["id"]: berlin["id"],
    }


def test_it_ends_a_session_for_consolidation(live_server, key):
    call(
        live_server.url,
        key,
        "store_message",
        session_id="s-1",
        role="user",
        content="I moved to Lisbon.",
    )

    ended = result(call(live_server.url, key, "end_session", session_id="s-1"))

    assert ended["session_id"] == "s-1" and ended["consolidation"] in ("queued", "deferred")
    run = ConsolidationRun.objects.get(agent_id="agent-a", session_id="s-1")
    assert run.trigger == "session_end"


def test_it_forgets_a_query_after_a_preview(live_server, key):
    call(live_server.url, key, "store_message", session_id="s-1", role="user", content="PIN 7731")
    call(live_server.url, key, "store_message", session_id="s-1", role="user", content="hello")

    preview = result(call(live_server.url, key, "forget", query="7731"))

    assert preview["confirm"] is False and preview["counts"]["messages"] == 1
    assert [item["snippet"] for item in preview["items"]] == ["PIN 7731"]
    assert MainMessage.objects.count() == 2
    assert "needs the preview's token" in error(call(live_server.url, key, "forget", confirm=True))

    done = result(call(live_server.url, key, "forget", confirm=True, token=preview["token"]))

    assert done["receipt"]["actor"] == "mcp" and done["receipt"]["counts"]["messages"] == 1
    assert list(MainMessage.objects.values_list("content", flat=True)) == ["hello"]


def test_it_ends_a_session_with_the_apis_answer(live_server, key, api, monkeypatch):
    # Both go through memory.messages.session_end: ending a waiting session joins its run,
    # so the two answers name the same run, in the same words.
    monkeypatch.setattr(timezone, "now", Clock(timezone.now().replace(microsecond=0)))
    for session in ("s-1", "s-2"):
        api.post(f"/sessions/{session}/messages", {"role": "user", "content": "hello"})
    api.post("/sessions/s-1/end")  # the agent's window: s-2 waits 30 s
    by_api = api.post("/sessions/s-2/end")

    by_mcp = result(call(live_server.url, key, "end_session", session_id="s-2"))

    assert by_api.status_code == 202 and by_api.json()["consolidation"] == "deferred"
    assert by_mcp == by_api.json()
    assert ConsolidationRun.objects.filter(session_id="s-2").count() == 1


def test_another_agents_key_sees_none_of_it(live_server, key, other_key):
    url = live_server.url
    call(url, key, "store_message", session_id="s-1", role="user", content="My PIN is 4321.")
    memory = result(call(url, key, "remember", content="The PIN is 4321.", memory_type="fact"))

    found = result(call(url, other_key, "search", query="PIN 4321", mode="lexical"))
    listed = result(call(url, other_key, "list_memories", query="PIN", state="all"))
    context = result(call(url, other_key, "get_context", session_id="s-1", query="PIN"))
    refused = [
        error(call(url, other_key, "update_memory", memory_id=memory["id"], content="Stolen.")),
        error(call(url, other_key, "expire_memory", memory_id=memory["id"])),
        error(call(url, other_key, "end_session", session_id="s-1")),
    ]

    assert found["hits"] == [] and listed == {"count": 0, "memories": []}
    assert "4321" not in json.dumps(context, ensure_ascii=False)
    assert all(message.endswith(": Not Found") for message in refused), refused
    stored = LongTermMemory.objects.get(pk=memory["id"])
    assert (stored.content, stored.expires_at) == ("The PIN is 4321.", None)
    assert not ConsolidationRun.objects.exists()
    assert not MainMessage.objects.filter(agent_id="agent-b").exists()


def test_it_names_itself_with_the_services_version(client, key):
    """The version pyproject.toml gives (it was empty), in the answer to initialize."""
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    answer = send(client, rpc("initialize", params), key)
    assert answer.status_code == 200, answer.content[:300]
    info = answer.json()["result"]["serverInfo"]
    assert info["name"] == "orca-memory"
    assert info["version"] == settings.VERSION and re.fullmatch(r"\d+\.\d+\.\d+", info["version"])


def test_it_refuses_no_key_a_bad_key_and_a_revoked_key(live_server, key):
    row, revoked = api_key_create(agent_id="agent-c")
    api_key_revoke(row)
    body = rpc(
        "tools/call",
        {"name": "store_message", "arguments": {"session_id": "s", "role": "user", "content": "x"}},
    )

    answers = [
        post(live_server.url, body),
        post(live_server.url, body, "orca_not-a-key"),
        post(live_server.url, body, revoked),
        post(live_server.url, body, Authorization=f"Basic {key}"),
    ]

    for answer in answers:
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert answer.json()["error"]["message"].startswith("Unauthorized")
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client cannot even start
        call(live_server.url, revoked, "list_memories")
    assert not MainMessage.objects.exists()


def test_a_message_the_database_cannot_take_is_kept_in_the_jsonl_backup(
    live_server, key, settings, monkeypatch, tmp_path
):
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)

    def locked(**fields: Any) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr("memory.messages.messages_add", locked)
    answer = call(
        live_server.url, key, "store_message", session_id="s-1", role="user", content="断网时的消息"
    )

    assert result(answer)["stored_in"] == "jsonl"
    (kept,) = (tmp_path / "jsonl").rglob("*.jsonl")
    assert "断网时的消息" in kept.read_text()
    assert not MainMessage.objects.exists()


BAD_ARGUMENTS = [
    # (tool, arguments, the error after "Error executing tool <tool>: ")
    (
        "store_message",
        {"session_id": "s", "role": "user", "content": " "},
        "content: String should match pattern '\\S'",
    ),
    (
        "store_message",
        {"session_id": "a/b", "role": "user", "content": "x"},
        "session_id must not contain '/', '\\', control characters or leading/trailing spaces",
    ),
    (
        "store_message",
        {"session_id": "s", "role": "user", "content": "x", "metadata": {"subagent": 1}},
        "metadata.subagent is reserved",
    ),
    (
        "store_message",
        {"session_id": "s", "role": "user", "content": "x" * (1024 * 1024 + 1)},
        "content is larger than 1048576 bytes",
    ),
    (
        "store_message",
        {"session_id": "s", "role": "robot", "content": "x"},
        "role: Input should be 'user', 'assistant', 'system' or 'tool'",
    ),
    (
        "store_message",
        {"session_id": "s", "role": "user", "content": "x", "msg_type": "rumour"},
        "msg_type: Input should be 'normal', 'fact', 'todo', 'decision', 'preference' or 'error'",
    ),
    (
        "get_context",
        {"session_id": "s", "model_window": 10},
        "model_window: Input should be greater than or equal to 256",
    ),
    ("search", {"query": "tea\x00"}, "query: query must not contain NUL characters"),
    ("search", {"query": "tea", "k": 0}, "k: Input should be greater than or equal to 1"),
    (
        "search",
        {"query": "tea", "mode": "x"},
        "mode: Input should be 'hybrid', 'lexical' or 'vector'",
    ),
    (
        "search",
        {"query": "tea", "k": "ten"},
        "k: Input should be a valid integer, unable to parse string as an integer",
    ),
    (
        "search",
        {"query": "tea", "since": "2026-05-01T09:00:00"},
        "since: since must give its time zone",
    ),
    ("search", {"query": "tea", "until": "yesterday"}, "until: Input should be a valid datetime"),
    (
        "remember",
        {"content": "x", "memory_type": "fact", "confidence": 1.5},
        "confidence: Input should be less than or equal to 1",
    ),
    (
        "remember",
        {"content": "x", "memory_type": "opinion"},
        "memory_type: Input should be 'preference', 'fact', 'decision' or 'project'",
    ),
    ("remember", {"memory_type": "fact"}, "content: Field required"),
    ("list_memories", {"query": "\x00"}, "query: query must not contain NUL characters"),
    ("list_memories", {"state": "x"}, "state: Input should be 'active' or 'all'"),
    (
        "update_memory",
        {"memory_id": 2**70},
        "memory_id: Input should be less than or equal to 9223372036854775807",
    ),
    (
        "update_memory",
        {"memory_id": 1, "content": ""},
        "content: String should have at least 1 character",
    ),
    ("end_session", {"session_id": ".."}, "session_id must not be only dots"),
]


def test_bad_arguments_are_tool_errors_with_the_apis_message(live_server, key):
    async def call_each(client: Client) -> list[CallToolResult]:
        return [await client.call_tool(tool, arguments) for tool, arguments, _ in BAD_ARGUMENTS]

    answers = with_client(live_server.url, key, call_each)  # one client: one initialize

    wrong = [
        (tool, message, answer.content[0].text)
        for (tool, _, message), answer in zip(BAD_ARGUMENTS, answers, strict=True)
        if not answer.is_error
        or not answer.content[0].text.startswith(f"Error executing tool {tool}: ")
        or message not in answer.content[0].text
        or "pydantic" in answer.content[0].text  # its own text, with a link to its docs
    ]
    assert wrong == []
    assert not MainMessage.objects.exists() and not LongTermMemory.objects.exists()


def test_the_api_and_mcp_refuse_the_same_content_with_the_same_message(live_server, key, client):
    response = client.post(
        "/api/v1/memories",
        {"content": "x", "memory_type": "fact", "expires_at": "2026-01-01T00:00:00"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    answer = call(
        live_server.url,
        key,
        "remember",
        content="x",
        memory_type="fact",
        expires_at="2026-01-01T00:00:00",
    )

    assert response.status_code == 422
    assert error(answer) == f"Error executing tool remember: {response.json()['detail']}"


SAME_REFUSALS = [
    # (tool, its arguments, the API's method, path and body or query refusing the same value)
    (
        "store_message",
        {"session_id": "s", "role": "robot", "content": "x"},
        "post",
        "/sessions/s/messages",
        {"role": "robot", "content": "x"},
    ),
    (
        "store_message",
        {"session_id": "s", "role": "user", "content": "x", "msg_type": "rumour"},
        "post",
        "/sessions/s/messages",
        {"role": "user", "content": "x", "msg_type": "rumour"},
    ),
    (
        "remember",
        {"content": "x", "memory_type": "opinion"},
        "post",
        "/memories",
        {"content": "x", "memory_type": "opinion"},
    ),
    ("search", {"query": "tea", "mode": "x"}, "get", "/search", {"q": "tea", "mode": "x"}),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "path", "sent"), SAME_REFUSALS)
def test_the_api_and_mcp_refuse_a_bad_choice_with_the_same_sentence(
    client, api, key, tool, arguments, method, path, sent
):
    refused = api.get(path, **sent) if method == "get" else api.post(path, sent)
    answer = send(client, rpc("tools/call", {"name": tool, "arguments": arguments}), key)

    assert refused.status_code == 422
    assert answer.status_code == 200
    called = answer.json()["result"]
    assert called["isError"] is True
    assert called["content"][0]["text"] == (
        f"Error executing tool {tool}: {refused.json()['detail']}"
    )
    assert not MainMessage.objects.exists() and not LongTermMemory.objects.exists()


STORE = {"name": "store_message", "arguments": {"session_id": "s", "role": "user", "content": "x"}}


@pytest.mark.parametrize(
    "id_", [1.5, 1.0, True, None, {}], ids=["1.5", "1.0", "true", "null", "{}"]
)
@pytest.mark.parametrize("wire", ["legacy", "2026-07-28"])
def test_a_request_whose_id_mcp_does_not_allow_is_refused_and_never_runs(client, key, id_, wire):
    headers = {"MCP-Protocol-Version": wire} if wire != "legacy" else {}

    refused = send(client, rpc("tools/call", STORE, id_), key, **headers)
    stored = send(client, rpc("tools/call", STORE, "call-1"), key)

    assert refused.status_code == 400
    assert jsonrpc_error(refused) == {
        "code": -32600,
        "message": "Invalid Request: id must be a string or an integer",
    }
    assert stored.status_code == 200 and stored.json()["id"] == "call-1"
    assert MainMessage.objects.count() == 1  # the second request's: the first never ran


def test_a_host_not_allowed_or_a_body_not_json_gets_a_json_rpc_error_not_a_page(client, key):
    wrong_host = send(client, rpc("ping"), key, Host="evil.example")
    plain_text = send(client, rpc("ping"), key, content_type="text/plain")
    no_type = send(client, rpc("ping"), key, content_type="")
    not_json = send(client, b"{'jsonrpc': '2.0'}", key)
    served = send(client, rpc("ping", id_=2), key)

    assert wrong_host.status_code == 400
    assert jsonrpc_error(wrong_host) == {"code": -32600, "message": "Bad Request"}
    for unsupported in (plain_text, no_type):
        assert unsupported.status_code == 415
        assert jsonrpc_error(unsupported) == {
            "code": -32600,
            "message": "Unsupported Media Type: send Content-Type: application/json",
        }
    assert not_json.status_code == 400
    assert jsonrpc_error(not_json)["code"] == -32700
    assert jsonrpc_error(not_json)["message"].startswith("Parse error: ")
    assert served.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_an_unexpected_error_is_a_json_rpc_error_that_tells_nothing_internal(
    client, key, monkeypatch
):
    def crashing(key: str) -> str:
        raise RuntimeError("a failure nobody expected, in /secret/path/orca.db")

    monkeypatch.setattr("memory.mcp_server.agent_for_key", crashing)
    client.raise_request_exception = False  # answered as in production

    response = send(client, rpc("tools/call", STORE), key)

    assert response.status_code == 500
    assert jsonrpc_error(response) == {"code": -32603, "message": "Internal Server Error"}
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize(
    "header", ["Bearer  {key}", "bearer {key}", "BEARER   {key}", " Bearer {key} "]
)
def test_a_key_after_extra_spaces_or_a_scheme_in_any_case_works_on_the_api_and_mcp_alike(
    client, key, header
):
    sent = {"Authorization": header.format(key=key)}

    api = client.get("/api/v1/sessions", headers=sent)
    mcp = send(client, rpc("ping"), None, **sent)

    assert api.status_code == 200, api.content
    assert mcp.status_code == 200, mcp.content


@pytest.mark.parametrize("header", ["Bearer{key}", "Bearer", "Bearer  ", "Token {key}", "{key}"])
def test_a_header_that_is_not_bearer_and_a_key_is_refused_on_the_api_and_mcp_alike(
    client, key, header
):
    sent = {"Authorization": header.format(key=key)}

    api = client.get("/api/v1/sessions", headers=sent)
    mcp = send(client, rpc("ping"), None, **sent)

    assert api.status_code == 401
    assert mcp.status_code == 401 and jsonrpc_error(mcp)["code"] == -32001


def test_malformed_json_rpc_gets_protocol_errors_and_the_server_keeps_serving(live_server, key):
    url = live_server.url
    answers = {
        "not json": post(url, b"{not json", key),
        "not utf-8": post(url, b"\xff\xfe", key),
        "a list": post(url, b"[]", key),
        "a batch": post(url, b"[" + rpc("ping") + b"]", key),
        "JSON-RPC 1.0": post(url, rpc("ping").replace(b'"2.0"', b'"1.0"'), key),
        "no method": post(url, b'{"jsonrpc": "2.0", "id": 1}', key),
        "deep": post(
            url,
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": '
            + b"[" * 5000
            + b"]" * 5000
            + b"}",
            key,
        ),
    }
    unknown_method = post(url, rpc("memories/steal"), key)
    unknown_tool = post(url, rpc("tools/call", {"name": "drop_database", "arguments": {}}), key)
    not_json = post(url, rpc("tools/list"), key, **{"Content-Type": "text/plain"})
    get = httpx.get(f"{url}/mcp", headers={"Authorization": f"Bearer {key}"})

    for name, answer in answers.items():
        assert answer.status_code == 400, name
        assert answer.json()["error"]["code"] in (-32700, -32600, -32602), name
    assert unknown_method.status_code == 200
    assert unknown_method.json()["error"] == {
        "code": -32601,
        "message": "Method not found",
        "data": "memories/steal",
    }
    assert unknown_tool.json()["result"]["isError"] is True
    assert "Unknown tool: drop_database" in unknown_tool.json()["result"]["content"][0]["text"]
    assert not_json.status_code == 415
    assert not_json.json()["error"]["code"] == -32600
    assert get.status_code == 405 and get.headers["Allow"] == "POST"
    listed = with_client(url, key, lambda client: client.list_tools())
    assert len(listed.tools) == len(TOOLS)


# Values a tool's arguments may meet: any JSON, and the words its enums and formats take.
PLAUSIBLE = ["user", "tool", "fact", "preference", "lexical", "all", "s-1", "2026-05-01T09:00:00Z"]
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(PLAUSIBLE),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)
ARGUMENT_NAMES = sorted(
    {name for names in TOOLS.values() for name in names}
    | {"k", "mode", "metadata", "state", "since", "confidence", "model_window", "extra"}
)


def test_random_arguments_get_answers_never_a_crash(live_server, key):
    """Schemathesis-style: any JSON as any tool's arguments is answered, as a result or a
    tool error that says what is wrong; never the SDK's bare message for a crash."""
    crashes: list[tuple[str, dict[str, Any], str]] = []
    with httpx.Client(
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    ) as http:

        @hypothesis.settings(max_examples=60, deadline=None, database=None, derandomize=True)
        @hypothesis.given(
            st.sampled_from(sorted(TOOLS)),
            st.dictionaries(st.sampled_from(ARGUMENT_NAMES), JSON_VALUES, max_size=6),
        )
        def check(tool: str, arguments: dict[str, Any]) -> None:
            body = rpc("tools/call", {"name": tool, "arguments": arguments})
            answer = http.post(
                f"{live_server.url}/mcp", content=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 200, (tool, arguments, answer.text)
            reply = answer.json()["result"]
            text = reply["content"][0]["text"]
            if reply.get("isError") and text == f"Error executing tool {tool}":
                crashes.append((tool, arguments, text))

        check()

    assert crashes == []


def test_an_oversized_body_is_refused_and_the_server_keeps_serving(live_server, key):
    filler = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    body = rpc(
        "tools/call", {"name": "remember", "arguments": {"content": filler, "memory_type": "fact"}}
    )

    answer = post(live_server.url, body, key)

    assert answer.status_code == 413
    assert answer.json()["error"]["message"] == "request body too large"
    assert not LongTermMemory.objects.exists()
    assert result(call(live_server.url, key, "list_memories")) == {"count": 0, "memories": []}


@pytest.fixture(scope="module")
def sqlite_home(tmp_path_factory) -> tuple[Path, str]:
    """A migrated ORCA_HOME of the module's processes, and a key of agent-a in it."""
    home = tmp_path_factory.mktemp("orca")
    manage(home, "migrate", "--no-input", ORCA_EMBEDDING_PROVIDER="none")
    key = last_line(
        manage(home, "create_api_key", "--agent", "agent-a", ORCA_EMBEDDING_PROVIDER="none")
    )
    return home, key


@pytest.fixture
def service(request, tmp_path) -> tuple[dict[str, str], str]:
    """The environment of a service process on the test's engine, and a key of agent-a: on
    PostgreSQL the test database itself, on SQLite a database of the module's."""
    if connection.vendor == "postgresql":
        env = service_env(
            tmp_path, ORCA_DATABASE_URL=database_url(), ORCA_EMBEDDING_PROVIDER="none"
        )
        return env, api_key_create(agent_id="agent-a")[1]
    home, key = request.getfixturevalue("sqlite_home")
    return service_env(home, ORCA_EMBEDDING_PROVIDER="none"), key


@pytest.mark.slow
@pytest.mark.postgres
def test_the_procfiles_server_answers_mcp_beside_the_api_and_the_dashboard(service):
    """gunicorn as `make run` starts it (two workers): /mcp, the JSON API and the dashboard on
    one port, every MCP request standing alone, whichever worker takes it."""
    env, key = service
    port = free_port()
    server = subprocess.Popen(
        procfile_web_command(f"127.0.0.1:{port}"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/api/v1/health", server)

        async def converse(client: Client) -> list[CallToolResult]:
            answers = []
            for turn in range(6):
                answers.append(
                    await client.call_tool(
                        "store_message",
                        {
                            "session_id": "s-1",
                            "role": "user",
                            "content": f"Turn {turn}: I like tea.",
                        },
                    )
                )
            answers.append(await client.call_tool("get_context", {"session_id": "s-1"}))
            answers.append(
                await client.call_tool(
                    "remember", {"content": "Likes tea.", "memory_type": "preference"}
                )
            )
            return answers

        answers = with_client(base, key, converse)
        api = httpx.get(
            f"{base}/api/v1/sessions/s-1/messages", headers={"Authorization": f"Bearer {key}"}
        )
        dashboard = httpx.get(f"{base}/")
        health = httpx.get(f"{base}/api/v1/health")
        refused = post(base, rpc("tools/list"), "orca_wrong")
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)

    assert not any(answer.is_error for answer in answers), output
    context = answers[6].structured_content
    assert [m["content"] for m in context["messages"]] == [
        f"Turn {turn}: I like tea." for turn in range(6)
    ]
    assert api.status_code == 200 and api.json()["count"] == 6
    assert health.status_code == 200
    assert dashboard.status_code == 302 and dashboard.headers["Location"].startswith("/login/")
    assert refused.status_code == 401
    assert output.count('"POST /mcp HTTP/1.1" 200') >= 8
    assert "Traceback" not in output


def test_it_serves_a_sessions_transcript_and_a_memory_as_resources(live_server, key, other_key):
    url = live_server.url
    for content in ("First.", "Second."):
        call(url, key, "store_message", session_id="s-1", role="user", content=content)
    memory = result(call(url, key, "remember", content="Likes tea.", memory_type="preference"))

    async def read(client: Client) -> tuple[Any, ...]:
        templates = await client.list_resource_templates()
        transcript = await client.read_resource("orca://sessions/s-1")
        remembered = await client.read_resource(f"orca://memories/{memory['id']}")
        return templates, transcript, remembered

    templates, transcript, remembered = with_client(url, key, read)

    assert {t.uri_template for t in templates.resource_templates} == {
        "orca://sessions/{session_id}",
        "orca://memories/{memory_id}",
    }
    session = json.loads(transcript.contents[0].text)
    assert [m["content"] for m in session["messages"]] == ["First.", "Second."]
    assert session["count"] == 2
    assert json.loads(remembered.contents[0].text)["content"] == "Likes tea."
    for uri in ("orca://sessions/s-1", f"orca://memories/{memory['id']}", "orca://memories/x"):
        assert with_client(url, other_key, lambda client, uri=uri: refusal(client, uri)) == (
            "Not Found"
        ), uri


async def refusal(client: Client, uri: str) -> str | None:
    """The message of the protocol error reading the resource gets, if any."""
    try:
        await client.read_resource(uri)
    except MCPError as exc:
        return exc.error.message
    return None


@pytest.mark.slow
@pytest.mark.postgres
def test_mcp_stdio_serves_the_same_tools_for_one_agent(service):
    env, _ = service
    command = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp_stdio", "--agent", "local-agent"],
        env=env,
        cwd=str(ROOT),
    )

    async def converse(client: Client) -> list[Any]:
        tools = await client.list_tools()
        stored = await client.call_tool(
            "store_message", {"session_id": "s-9", "role": "user", "content": "Stdio works."}
        )
        context = await client.call_tool("get_context", {"session_id": "s-9"})
        refused = await client.call_tool("expire_memory", {"memory_id": 1})
        return [tools, stored, context, refused]

    async def run() -> list[Any]:
        async with Client(stdio_client(command)) as client:
            return await converse(client)

    tools, stored, context, refused = anyio.run(run)

    assert {tool.name for tool in tools.tools} == set(TOOLS)
    assert result(stored)["session_id"] == "s-9"
    assert result(context)["messages"] == [{"role": "user", "content": "Stdio works."}]
    assert error(refused) == "Error executing tool expire_memory: Not Found"
    if connection.vendor == "postgresql":
        rows = list(MainMessage.objects.values_list("agent_id", "session_id", "content"))
    else:
        database = sqlite3.connect(Path(env["ORCA_HOME"]) / "data" / "orca.db")
        rows = database.execute(
            "SELECT agent_id, session_id, content FROM main_messages WHERE agent_id = ?",
            ["local-agent"],
        ).fetchall()
        database.close()
    assert rows == [("local-agent", "s-9", "Stdio works.")]


class StdioSession:
    """`manage.py mcp_stdio` in a process of its own, spoken to a line at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "mcp_stdio", "--agent", "local-agent"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def ask(self, line: bytes) -> dict[str, Any]:
        """Send one line; the one JSON-RPC message it is answered with."""
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()
        return json.loads(self.lines.get(timeout=60))

    def close(self) -> str:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        return self.process.stderr.read().decode()


@pytest.mark.slow
def test_mcp_stdio_answers_each_line_that_is_no_message_with_an_error_and_serves_the_next(
    service,
):
    env, _ = service
    # The hostile-input table's rows that are a body alone, each sent as one line.
    hostile = [
        case
        for case in MCP_CASES
        if case.key and not case.crash and not case.headers and case.content_type == JSON
    ]
    session = StdioSession(env)
    try:
        initialized = session.ask(
            rpc(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
                "init",
            )
        )
        answers = []
        for number, case in enumerate(hostile):
            body = case.body if isinstance(case.body, bytes) else case.body.encode()
            answers.append((case, session.ask(body), session.ask(rpc("ping", id_=number))))
        refused = session.ask(
            rpc(
                "tools/call",
                {"name": "store_message", "arguments": {"session_id": "s", "role": "robot"}},
                "robot",
            )
        )
    finally:
        errors = session.close()

    assert initialized["id"] == "init" and "result" in initialized, initialized
    assert len(hostile) >= 14
    for number, (case, answer, ping) in enumerate(answers):
        assert answer["id"] is None and answer["error"]["code"] == case.code, (case.name, answer)
        assert ping == {"jsonrpc": "2.0", "id": number, "result": {}}, case.name
    assert refused["result"]["isError"] is True
    assert refused["result"]["content"][0]["text"] == (
        "Error executing tool store_message: role: Input should be 'user', 'assistant', "
        "'system' or 'tool'; content: Field required"
    )
    assert "Traceback" not in errors
