"""Helpers shared by tests that run the service in processes of their own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


def service_env(home: Path, **env: str) -> dict[str, str]:
    """The environment of a service process of its own: ORCA_HOME=home, not the tests'."""
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    environment.update(ORCA_HOME=str(home), **env)
    return environment


def on_this_database(script: str, **env: str) -> subprocess.Popen[str]:
    """`python -c script` in a process of its own on this test's database (a second worker),
    its standard streams piped, so that the test can tell it when to go on."""
    from django.db import connection

    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    environment.update(
        DJANGO_SETTINGS_MODULE="orca_memory.settings",
        ORCA_DB_PATH=str(connection.settings_dict["NAME"]),
        ORCA_EMBEDDING_PROVIDER="none",
        **env,
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def manage(
    home: Path, *args: str, check: bool = True, umask: int = -1, **env: str
) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` in its own process with ORCA_HOME=home: never the test database.

    `umask` sets the process's (-1 keeps ours)."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=service_env(home, **env),
        capture_output=True,
        text=True,
        timeout=300,
        umask=umask,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def procfile_command(name: str) -> str:
    """The Procfile's command for process `name`, with this interpreter as `python`."""
    (line,) = [
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:")
    ]
    return line.split(":", 1)[1].strip().replace("python ", f"{sys.executable} ")


def procfile_process(
    name: str, home: Path, *, output: int | None = subprocess.DEVNULL, **env: str
) -> subprocess.Popen[bytes]:
    """The Procfile's process `name` started as `make run`'s honcho starts it (`sh -c` with
    the venv's commands first on PATH, a session of its own, so that signals reach the whole
    group: stop it with stop_group)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.Popen(
        ["sh", "-c", procfile_command(name)],
        cwd=ROOT,
        env=service_env(home, PATH=path, **env),
        stdout=output,
        stderr=output,
        start_new_session=True,
    )


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Send `sig` to the process's whole group (its shell and what the shell started)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    process.wait(timeout=60)


@contextlib.contextmanager
def worker_hanging_on_the_chat_model(home: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A `db_worker` whose chat model takes connections and never answers, so that it hangs
    in the first task that asks it (a summary, a consolidation's extraction), as one does in
    a slow call when it is killed; killed (SIGKILL) when the block ends."""
    with contextlib.closing(socket.socket()) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        chat = {
            "LLM_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
            "LLM_MODEL": "silent",
        }
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "db_worker", "--no-startup-delay", "--interval", "0.2"],
            cwd=ROOT,
            env=service_env(home, **env, **chat),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield worker
        finally:
            worker.kill()
            worker.wait(timeout=30)


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def database_url() -> str:
    """The test database's URL on PostgreSQL, for processes and connections of their own."""
    from django.db import connection

    db = connection.settings_dict
    return (
        f"postgresql://{quote(db['USER'])}:{quote(db['PASSWORD'])}@/{quote(db['NAME'])}"
        f"?host={quote(db['HOST'])}"
    )
