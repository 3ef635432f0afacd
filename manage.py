#!/usr/bin/env python
"""Django's command-line utility for orca-memory."""

import os
import sys

# The commands that serve load what the web server loads (orca_memory.settings, as wsgi.py
# does): the task worker and the MCP server over stdio. Every other command may be one of the
# benchmarks and evaluations of the `bench` app, so its settings add that app.
SERVING = frozenset({"db_worker", "mcp_stdio"})


def settings_module(argv: list[str]) -> str:
    """The settings for `manage.py` run with these arguments."""
    command = argv[1] if len(argv) > 1 else "help"
    return "orca_memory.settings" if command in SERVING else "orca_memory.settings_bench"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module(sys.argv))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
