"""The MCP server at /mcp, driven over Streamable HTTP by the official SDK's own client.

Most tests run the site in pytest-django's live server (a thread: they run on PostgreSQL
too); the slow one starts the Procfile's gunicorn, as `make run` does, with two workers.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import hypothesis
import pytest
from django.conf import settings
from django.db import OperationalError, connection
from hypothesis import strategies as st
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from memory.auth import api_key_create, api_key_revoke
from memory.models import ConsolidationRun, LongTermMemory, LongTermMemoryHistory, MainMessage
from tests.helpers import ROOT, database_url, last_line, manage, service_env
from tests.test_access_log import free_port, procfile_web_command, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "store_message": {"session_id", "role", "content"},
    "get_context": {"session_id"},
    "search": {"query"},
    "remember": {"content", "memory_type"},
    "list_memories": set(),
    "update_memory": {"memory_id"},
    "expire_memory": {"memory_id"},
    "end_session": {"session_id"},
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


def rpc(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})


@pytest.fixture
def key() -> str:
    return api_key_create(agent_id="agent-a")[1]


@pytest.fixture
def other_key() -> str:
    return api_key_create(agent_id="agent-b")[1]


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
    role = tools["store_message"].input_schema["properties"]["role"]
    assert role["enum"] == ["user", "assistant", "system", "tool"]
    assert tools["search"].annotations.read_only_hint is True


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

    monkeypatch.setattr("memory.messages.message_add", locked)
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
        "Input should be 'user', 'assistant', 'system' or 'tool'",
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
        {"content": "x", "memory_type": "rumour"},
        "Input should be 'preference', 'fact', 'decision' or 'project'",
    ),
    ("list_memories", {"query": "\x00"}, "query: query must not contain NUL characters"),
    (
        "update_memory",
        {"memory_id": 2**70},
        "Input should be less than or equal to 9223372036854775807",
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


def test_malformed_json_rpc_gets_protocol_errors_and_the_server_keeps_serving(live_server, key):
    url = live_server.url
    answers = {
        "not json": post(url, b"{not json", key),
        "not utf-8": post(url, b"\xff\xfe", key),
        "a list": post(url, b"[]", key),
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
    assert not_json.status_code == 400
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
