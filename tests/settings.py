"""Test settings: a throwaway ORCA_HOME, so tests never read or write the user's ~/.orca."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ["ORCA_HOME"] = tempfile.mkdtemp(prefix="orca-test-")
atexit.register(shutil.rmtree, os.environ["ORCA_HOME"], ignore_errors=True)
for name in list(os.environ):
    if name.startswith(("ORCA_", "LLM_", "EMBEDDING_", "SILICONFLOW_", "OPENAI_")) and (
        name != "ORCA_HOME"
    ):
        del os.environ[name]

# Lexical-only unless a test installs an embedder (tests/fakes.py, the `fake_embedder` fixture).
os.environ["ORCA_EMBEDDING_PROVIDER"] = "none"

# With the bench app, as manage.py's commands: tests run its commands in-process too.
from orca_memory.settings_bench import *  # noqa: E402, F403

TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

STATIC_ROOT = ORCA.data_dir / "static"  # noqa: F405
STATIC_ROOT.mkdir(exist_ok=True)
