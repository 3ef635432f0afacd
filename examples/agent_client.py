"""A minimal agent talking to orca-memory over HTTP (httpx).

    export ORCA_URL=http://127.0.0.1:8000   # the default; what `make run` printed if not
    export ORCA_API_KEY=$(.venv/bin/python manage.py create_api_key --agent demo | tail -1)
    .venv/bin/python examples/agent_client.py

ORCA_URL is the server's address without /api/v1: `make run` serves BIND (127.0.0.1:8000
unless `make run BIND=host:port`) and prints it.

It stores a short conversation (its first messages in one batch call), lets a sub-agent
work on one turn (its transcript stays apart; only its result joins the conversation), then
asks for the context of the next LLM call and prints it with the explanation of what went
into it.
"""

from __future__ import annotations

import os
import sys
import uuid

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


def main() -> int:
    server = os.environ.get("ORCA_URL", DEFAULT_URL).rstrip("/")
    key = os.environ.get("ORCA_API_KEY")
    if not key:
        print("Set ORCA_API_KEY (manage.py create_api_key --agent demo).", file=sys.stderr)
        return 2
    try:
        return talk(f"{server}/api/v1", key)
    except httpx.ConnectError as exc:
        print(
            f"No orca-memory server answers at {server} ({exc}). Start one with `make run`, "
            "or set ORCA_URL to the address it printed (make run BIND=host:port changes it).",
            file=sys.stderr,
        )
        return 1


def talk(base_url: str, key: str) -> int:
    """Store a conversation and a sub-agent run, then print the next call's context."""
    session = f"demo-{uuid.uuid4().hex[:8]}"
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10
    ) as orca:

        def post(path: str, body: dict) -> dict:
            response = orca.post(path, json=body)
            response.raise_for_status()
            return response.json()

        # Messages that arrive together (an imported history, a whole turn) go in one call:
        # up to 1,000, stored in order, all or none.
        post(
            f"/sessions/{session}/messages:batch",
            {
                "messages": [
                    {"role": "user", "content": "我喜欢简洁的回答。", "msg_type": "preference"},
                    {"role": "user", "content": "Please write a function that adds two numbers."},
                ]
            },
        )
        call = post(
            f"/sessions/{session}/messages",
            {"role": "assistant", "content": "I'll ask the coder sub-agent.", "msg_type": "normal"},
        )

        # The sub-agent's replies are recorded under the message that called it...
        run = f"/messages/{call['id']}/subagent"
        post(run, {"agent_name": "coder", "role": "system", "content": "You write Python."})
        post(run, {"agent_name": "coder", "role": "assistant", "content": "Thinking: def add..."})
        # ...and only its result joins the main conversation, as a `tool` message.
        result = post(
            f"{run}/result", {"agent_name": "coder", "content": "def add(a, b):\n    return a + b"}
        )
        post(f"/sessions/{session}/messages", {"role": "assistant", "content": result["content"]})

        print(f"Session {session}:")
        for message in orca.get(f"/sessions/{session}/messages").json()["items"]:
            print(
                f"  [{message['role']:>9}] {message['content']!r} ({message['token_count']} tokens)"
            )
        transcript = orca.get(run).json()
        print(f"Sub-agent transcript of message {call['id']} (kept out of the conversation):")
        for message in transcript["messages"]:
            print(f"  [{message['agent_name']}/{message['role']}] {message['content']!r}")

        # Before the next LLM call: what to send, within 60% of the model's window.
        context = post(
            f"/sessions/{session}/context",
            {"query": "How should I answer the user?", "model_window": 8192},
        )
        print("Context for the next LLM call:")
        for message in context["messages"]:
            print(f"  {message['role']}: {message['content']!r}")
        explanation = context["explanation"]
        print(f"Budget {explanation['used']}/{explanation['budget']} tokens:")
        for name, layer in explanation["layers"].items():
            ids = [item["id"] for item in layer["items"]]
            print(f"  {name}: {layer['used']}/{layer['budget']} tokens by {layer['method']}, {ids}")
        for reason in explanation["degraded"]:
            print(f"  degraded: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
