"""An agent using orca-memory over MCP, with the official MCP SDK's own client (`mcp`).

    export ORCA_URL=http://127.0.0.1:8000   # the default; what `make run` printed if not
    export ORCA_API_KEY=$(.venv/bin/python manage.py create_api_key --agent demo | tail -1)
    .venv/bin/python examples/mcp_client.py

The server is ORCA_URL/mcp (Streamable HTTP); the key goes in `Authorization: Bearer`, as for
the JSON API, and the calls see only that key's agent.

It lists the tools, stores a short conversation, remembers a preference, then asks for the
context of the next LLM call and searches the agent's earlier messages.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

DEFAULT_URL = "http://127.0.0.1:8000"


def main() -> int:
    server = os.environ.get("ORCA_URL", DEFAULT_URL).rstrip("/")
    key = os.environ.get("ORCA_API_KEY")
    if not key:
        print("Set ORCA_API_KEY (manage.py create_api_key --agent demo).", file=sys.stderr)
        return 2
    try:
        return asyncio.run(talk(f"{server}/mcp", key))
    except* httpx2.ConnectError as refused:  # the SDK's client raises it in a group
        print(
            f"No orca-memory server answers at {server} ({refused.exceptions[0]}). Start one "
            "with `make run`, or set ORCA_URL to the address it printed (make run BIND=host:port "
            "changes it).",
            file=sys.stderr,
        )
    return 1


async def use(client: Client, tool: str, **arguments: Any) -> Any:
    """Call a tool; a refused call (bad arguments, another agent's memory) says why."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return result.structured_content


async def talk(url: str, key: str) -> int:
    session = f"demo-{uuid.uuid4().hex[:8]}"
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        print("Tools:", ", ".join(tool.name for tool in tools.tools))

        await use(
            client, "store_message", session_id=session, role="user", content="我喜欢简洁的回答。"
        )
        await use(
            client,
            "store_message",
            session_id=session,
            role="user",
            content="Please write a function that adds two numbers.",
        )
        await use(
            client,
            "store_message",
            session_id=session,
            role="assistant",
            content="def add(a, b):\n    return a + b",
        )
        memory = await use(
            client, "remember", content="The user prefers short answers.", memory_type="preference"
        )
        print(f"Remembered #{memory['id']}: {memory['content']}")

        # Before the next LLM call: what to send, within 60% of the model's window.
        context = await use(
            client,
            "get_context",
            session_id=session,
            query="How should I answer?",
            model_window=8192,
        )
        print("Context for the next LLM call:")
        for message in context["messages"]:
            print(f"  {message['role']}: {message['content']!r}")
        print("Why:")
        for line in context["explanation"].splitlines():
            print(f"  {line}")

        found = await use(client, "search", query="add two numbers", mode="lexical", k=3)
        print(f"Search ({found['mode']}):")
        for hit in found["hits"]:
            print(f"  {hit['message']['session_id']}: {hit['message']['content']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
