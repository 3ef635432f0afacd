"""The sign-in hint, `make run`, the README and the example name the address really served."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from tests.helpers import ROOT, service_env


def test_ensure_admin_names_the_address_it_is_given(client, db):
    out = StringIO()
    call_command("ensure_admin", "--url", "http://127.0.0.1:9123/", stdout=out)
    match = re.fullmatch(r"Sign in at http://127.0.0.1:9123/ as admin / (\S+)\n", out.getvalue())
    assert match
    # Through the real sign-in form (django-axes wants the request).
    signed_in = client.post(reverse("login"), {"username": "admin", "password": match[1]})
    assert signed_in.status_code == 302

    again = StringIO()
    call_command("ensure_admin", "--url", "http://127.0.0.1:9123/", stdout=again)
    assert again.getvalue().startswith("Sign in at http://127.0.0.1:9123/ with your superuser")
    assert get_user_model().objects.count() == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bind", "url"),
    [
        ("127.0.0.1:9123", "http://127.0.0.1:9123"),
        # Every interface: the address to open on this machine is the loopback one.
        ("0.0.0.0:9124", "http://127.0.0.1:9124"),
    ],
)
def test_make_run_prints_and_signs_in_at_the_address_bind_names(bind, url):
    # -n: print the commands without running them (nothing is installed or started).
    result = subprocess.run(
        ["make", "-n", "run", f"BIND={bind}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert f"manage.py ensure_admin --url {url}/" in result.stdout
    assert f"orca-memory is starting on {url}/" in result.stdout
    assert f"ORCA_URL={url} " in result.stdout
    assert f"ORCA_BIND={bind} " in result.stdout
    assert ":8000" not in result.stdout


def test_the_readme_says_how_to_change_the_address_and_tell_the_example():
    readme = (ROOT / "README.md").read_text()
    example = (ROOT / "examples" / "agent_client.py").read_text()

    assert "make run BIND=host:port" in readme
    assert "ORCA_ALLOWED_HOSTS" in readme
    assert "export ORCA_URL=" in readme
    assert "ORCA_URL" in example and "BIND" in example


@pytest.mark.slow
def test_the_example_client_names_orca_url_when_no_server_answers(tmp_path):
    with socket.socket() as unused:  # a port nothing listens on once it is closed
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    result = subprocess.run(
        [sys.executable, "examples/agent_client.py"],
        cwd=ROOT,
        env=service_env(tmp_path, ORCA_URL=url, ORCA_API_KEY="orca_x"),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert f"No orca-memory server answers at {url}" in result.stderr
    assert "ORCA_URL" in result.stderr and "BIND=host:port" in result.stderr
    assert "Traceback" not in result.stderr
