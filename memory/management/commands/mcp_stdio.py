"""`manage.py mcp_stdio --agent NAME`: the MCP tools over stdio, for runtimes that only launch
local processes. The same tools as /mcp (memory/mcp_server.py), for one agent; no key is
needed, as for any manage.py command: whoever can run it can read the database."""

from __future__ import annotations

from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.mcp_server import current_agent, serve_stdio
from memory.validation import InvalidInput, check_identifier


class Command(BaseCommand):
    help = (
        "Serve the MCP tools over stdin/stdout for one agent (JSON-RPC on stdout, logs on stderr)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", required=True, help="the agent_id the tools read and write")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = check_identifier("agent_id", options["agent"])
        except InvalidInput as exc:
            raise CommandError(str(exc)) from exc
        current_agent.set(agent)  # the whole process is this agent's
        anyio.run(serve_stdio)
