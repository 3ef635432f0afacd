"""gunicorn as the Procfile runs it: no query string in the access log, no shared control socket."""

from __future__ import annotations

import shlex
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from gunicorn.config import Config
from gunicorn.glogging import SafeAtoms

from orca_memory.gunicorn_conf import PathOnlyAccessLogger
from tests.helpers import ROOT, last_line, manage, service_env

SECRET = "my-bank-password"

# Requests whose text must not reach the log: (RAW_URI, request headers).
HOSTILE_REQUESTS = [
    (f"/api/v1/search?q={SECRET}&mode=lexical", []),
    (f"/api/v1/memories?q={SECRET}", []),
    (f"/sessions/?q={SECRET}", []),
    ("/api/v1/health", [("REFERER", f"http://127.0.0.1:8000/sessions/?q={SECRET}")]),
    ("/sessions/?page=2", [("HX-CURRENT-URL", f"http://127.0.0.1:8000/memories/?q={SECRET}")]),
    (f"/static/site.css?{SECRET}", []),
]


def access_line(raw_uri: str, headers: list[tuple[str, str]]) -> str:
    config = Config()
    config.set("access_log_format", config.access_log_format + ' "%({hx-current-url}i)s" %(q)s')
    logger = PathOnlyAccessLogger(config)
    path, _, query = raw_uri.partition("?")
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": raw_uri,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        **{f"HTTP_{name.replace('-', '_')}": value for name, value in headers},
    }
    response = SimpleNamespace(status="200 OK", sent=10, headers=[])
    request = SimpleNamespace(headers=headers)
    atoms = logger.atoms(response, request, environ, timedelta(milliseconds=3))
    return config.access_log_format % SafeAtoms(atoms)  # as gunicorn formats it


@pytest.mark.parametrize(("raw_uri", "headers"), HOSTILE_REQUESTS)
def test_the_access_log_never_holds_a_query_string(raw_uri, headers):
    line = access_line(raw_uri, headers)

    assert SECRET not in line
    assert f'"GET {raw_uri.partition("?")[0]} HTTP/1.1" 200' in line


def test_the_access_log_keeps_the_referers_page():
    line = access_line("/api/v1/health", [("REFERER", f"http://h:1/sessions/?q={SECRET}")])

    assert '"http://h:1/sessions/"' in line


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def procfile_web_command(bind: str) -> list[str]:
    """The Procfile's `web` line as honcho would run it, with ORCA_BIND=bind."""
    (line,) = [
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:")
    ]
    words = shlex.split(line.removeprefix("web:").replace("$ORCA_BIND", bind))
    return [str(Path(sys.executable).parent / words[0]), *words[1:]]


def wait_for(url: str, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "gunicorn stopped"
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("gunicorn did not answer within 60 s")


@pytest.mark.slow
def test_the_procfiles_gunicorn_logs_paths_alone_and_leaves_no_socket_in_home(tmp_path):
    home, user_home, runtime = tmp_path / "orca", tmp_path / "user", tmp_path / "run"
    user_home.mkdir()
    runtime.mkdir()
    manage(home, "migrate", "--no-input")
    key = last_line(manage(home, "create_api_key", "--agent", "a1"))
    port = free_port()
    env = service_env(home, HOME=str(user_home), XDG_RUNTIME_DIR=str(runtime))
    server = subprocess.Popen(
        procfile_web_command(f"127.0.0.1:{port}"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/api/v1/health", server)
        found = httpx.get(
            f"{base}/api/v1/search",
            params={"q": SECRET, "mode": "lexical"},
            headers={"Authorization": f"Bearer {key}", "Referer": f"{base}/?q={SECRET}"},
        )
        refused = httpx.get(f"{base}/api/v1/memories", params={"q": SECRET})
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)

    assert found.status_code == 200 and refused.status_code == 401
    assert '"GET /api/v1/search HTTP/1.1" 200' in output
    assert '"GET /api/v1/memories HTTP/1.1" 401' in output
    assert SECRET not in output
    assert list(user_home.iterdir()) == [] and list(runtime.iterdir()) == []
