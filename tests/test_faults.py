"""The embedding provider misbehaving, then recovering (a stub server on 127.0.0.1)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory import embeddings, index, vectors
from memory.embeddings import EmbeddingError, HttpEmbedder
from memory.health import service_health
from memory.models import MainMessage
from orca_memory.core.db.base import Driver
from tests.factories import add_message
from tests.helpers import (
    ROOT,
    last_line,
    manage,
    procfile_command,
    procfile_process,
    service_env,
    stop_group,
)

pytestmark = pytest.mark.django_db

DIM = 8


class StubProvider(BaseHTTPRequestHandler):
    """An OpenAI-compatible /embeddings endpoint that behaves as `script` says, in order:
    "ok", "slow", "429", "500", "garbage", "wrong-dims"; then "ok" once the script is done."""

    script: list[str] = []
    calls: list[str] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.script.pop(0) if self.script else "ok"
        self.calls.append(mode)
        if mode == "slow":
            time.sleep(0.5)  # beyond the client's timeout
        if mode in ("429", "500"):
            return self._send(int(mode), b'{"error": "try later"}')
        if mode == "garbage":
            return self._send(200, b"<html>oops</html>")
        size = DIM - 1 if mode == "wrong-dims" else DIM
        data = [
            {"index": i, "embedding": [1.0 / (i + 1)] + [0.5] * (size - 1)}
            for i, _ in enumerate(body["input"])
        ]
        self._send(200, json.dumps({"data": data}).encode())

    def _send(self, status: int, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)
        except BrokenPipeError:
            pass  # the client timed out and left

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider(monkeypatch) -> Iterator[type[StubProvider]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubProvider.script, StubProvider.calls = [], []
    client = HttpEmbedder(
        provider="siliconflow",
        base_url=f"http://127.0.0.1:{server.server_port}/v1",
        api_key="sk-stub",
        model="Pro/BAAI/bge-m3",
        dimension=DIM,
        attempts=2,
        backoff_seconds=0,
        timeout_seconds=0.2,
    )
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: client)
    yield StubProvider
    server.shutdown()


def stored(n: int) -> list[MainMessage]:
    return [add_message(f"message number {i} to embed") for i in range(n)]


@pytest.mark.parametrize(
    "outage",
    [["slow", "slow"], ["429", "429"], ["500", "500"], ["garbage"], ["wrong-dims"]],
)
def test_an_outage_loses_nothing_shows_in_health_and_drains_after(provider, outage):
    messages = stored(4)
    provider.script = list(outage)

    with pytest.raises(EmbeddingError):
        vectors.embed_pending(batch_size=2)

    assert MainMessage.objects.count() == 4
    assert MainMessage.objects.awaiting_embedding().count() == 4
    health = service_health()
    assert health.status == "degraded" and health.embedding["failing"] is True
    assert health.embedding["last_error"]
    assert "sk-stub" not in json.dumps(health.as_dict(), default=str)

    assert vectors.embed_pending(batch_size=2) == 4  # the provider is back
    assert service_health().status == "ok"
    probe = [1.0] + [0.5] * (DIM - 1)
    hits = index.knn(index.MESSAGE_VECTORS, agent_id="a1", embedding=probe, k=100)
    assert sorted(hit.id for hit in hits) == [m.pk for m in messages]  # one vector each


def test_a_transient_error_is_retried_within_the_run(provider):
    stored(2)
    provider.script = ["429"]
    assert vectors.embed_pending(batch_size=2) == 2
    assert provider.calls == ["429", "ok"]


class SlowProvider(StubProvider):
    """The stub provider, answering every batch after a pause (a worker is killed mid-way)."""

    def do_POST(self) -> None:
        time.sleep(1)
        super().do_POST()


@pytest.mark.slow
def test_a_worker_killed_mid_batch_then_restarted_leaves_exactly_one_vector_each(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowProvider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    SlowProvider.script, SlowProvider.calls = [], []
    env = {
        "ORCA_EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1",
        "OPENAI_EMBEDDING_MODEL": "stub",
        "ORCA_EMBEDDING_DIM": str(DIM),
    }

    def embedded() -> int:
        db = Driver.connect(str(tmp_path / "data" / "orca.db"))
        try:
            return db.execute("SELECT count(*) FROM main_messages WHERE has_embedding").fetchone()[
                0
            ]
        finally:
            db.close()

    started = []

    def worker() -> subprocess.Popen[bytes]:
        started.append(procfile_process("worker", tmp_path, **env))
        return started[-1]

    try:
        manage(tmp_path, "migrate", "--no-input", **env)
        manage(tmp_path, "shell", "-c", STORE_30, **env)
        first = worker()
        deadline = time.monotonic() + 60
        while embedded() < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        stop_group(first)  # SIGKILL mid-run: the next batch is in flight
        assert 5 <= embedded() < 30

        second = worker()
        deadline = time.monotonic() + 90
        while embedded() < 30 and time.monotonic() < deadline:
            time.sleep(0.5)
        stop_group(second, signal.SIGTERM)
        assert embedded() == 30
        counts = last_line(manage(tmp_path, "shell", "-c", VECTORS_PER_MESSAGE, **env))
        assert counts == "30 30 1"  # rows, ids, max per id
    finally:
        server.shutdown()
        for process in started:
            stop_group(process)


PRUNE_COMMAND = next(
    part.strip()
    for part in procfile_command("worker").split(";")
    if "prune_db_task_results" in part
)
STORE_30 = (
    "from memory.messages import message_add\n"
    "for i in range(30): message_add(agent_id='a1', session_id='s1', role='user', "
    "content=f'message number {i} to embed')"
)
VECTORS_PER_MESSAGE = (
    "from django.db import connection; c = connection.cursor(); "
    "c.execute('SELECT count(*), count(DISTINCT msg_id) FROM vec_main_messages'); rows, ids = c.fetchone(); "
    "c.execute('SELECT max(n) FROM (SELECT count(*) AS n FROM vec_main_messages GROUP BY msg_id)'); "
    "print(rows, ids, c.fetchone()[0])"
)


class StubChat(BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions answering as `script` says: "500", "429",
    "garbage", "slow"; "ok" answers a summary once the script is done."""

    script: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        mode = self.script.pop(0) if self.script else "ok"
        if mode == "slow":
            time.sleep(0.5)
        status = int(mode) if mode.isdigit() else 200
        body = (
            b"not json"
            if mode == "garbage"
            else json.dumps({"choices": [{"message": {"content": "用户想喝茶。"}}]}).encode()
        )
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("outage", [["500", "500"], ["429", "429"], ["garbage"], ["slow", "slow"]])
def test_a_failing_chat_model_falls_back_to_the_offline_summary_then_recovers(monkeypatch, outage):
    from memory import summaries
    from memory.llm import ChatClient

    server = ThreadingHTTPServer(("127.0.0.1", 0), StubChat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    StubChat.script = list(outage)
    chat = ChatClient(
        base_url=f"http://127.0.0.1:{server.server_port}/v1",
        api_key="sk-stub",
        model="m",
        attempts=2,
        backoff_seconds=0,
        timeout_seconds=0.2,
    )
    monkeypatch.setattr(summaries, "configured_chat", lambda: chat)
    try:
        add_message("我想喝茶")
        reply = add_message("好的。", role="assistant")
        assert summaries.summarize_turns([reply])[0].content == "user: 我想喝茶 / assistant: 好的。"
        assert summaries.summarize_turns([reply])[0].content == "用户想喝茶。"  # the model is back
    finally:
        server.shutdown()


SEED_TASK_RESULTS = """
from datetime import timedelta
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
now = timezone.now()
for status, days in [("SUCCESSFUL", 20), ("FAILED", 20), ("SUCCESSFUL", 1), ("READY", None)]:
    DBTaskResult.objects.create(
        status=status,
        finished_at=None if days is None else now - timedelta(days=days),
        args_kwargs={"args": [], "kwargs": {}},
        task_path="memory.tasks.embed_pending_task",
        backend_name="default",
        run_after=now,
        exception_class_path="",
        traceback="",
    )
"""
TASK_STATUSES = (
    "from django_tasks_db.models import DBTaskResult; "
    "print(sorted(DBTaskResult.objects.values_list('status', flat=True)))"
)


@pytest.mark.slow
def test_the_worker_drops_task_records_finished_over_two_weeks_ago_at_start(tmp_path):
    manage(tmp_path, "migrate", "--no-input")
    manage(tmp_path, "shell", "-c", SEED_TASK_RESULTS)

    subprocess.run(PRUNE_COMMAND, shell=True, cwd=ROOT, env=service_env(tmp_path), check=True)

    assert last_line(manage(tmp_path, "shell", "-c", TASK_STATUSES)) == "['READY', 'SUCCESSFUL']"
