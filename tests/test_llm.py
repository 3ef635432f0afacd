"""The chat model over HTTP (a stub server on 127.0.0.1, the real httpx client): structured
output checked and asked again once, retries with backoff and Retry-After, servers that refuse
`response_format`, the offline path when it fails, and the counts health reports."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from memory import consolidation, heartbeat, llm, summaries
from memory.consolidation import InvalidAnswer, llm_extract
from memory.llm import ChatClient, Counts, LLMError, Usage
from memory.models import LongTermMemory, ShortTermMemory
from memory.remote import retry_after_seconds
from memory.summaries import summarize_turns
from tests.factories import add_message, consolidate_session


@dataclasses.dataclass
class Step:
    """One answer of the stub: a JSON body (or raw text) with a status and headers, given
    after `delay` seconds."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0


def said(content: str, *, tokens: tuple[int, int] | None = (120, 30)) -> Step:
    """A chat completion whose message is `content`, with token usage unless None."""
    body: dict[str, Any] = {"choices": [{"message": {"role": "assistant", "content": content}}]}
    if tokens is not None:
        body["usage"] = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
    return Step(body)


class FakeChatServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions answering the steps of `script` in turn; every
    request body is kept in `requests`. Past the script it answers 500."""

    script: list[Step] = []
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, **body})
        step = self.script.pop(0) if self.script else Step({"error": "script done"}, 500)
        time.sleep(step.delay)
        text = step.body if isinstance(step.body, str) else json.dumps(step.body)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
            self.send_response(step.status)
            self.send_header("Content-Type", "application/json")
            for name, value in step.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(text.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[type[FakeChatServer]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeChatServer)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    FakeChatServer.script, FakeChatServer.requests = [], []
    FakeChatServer.url = f"http://127.0.0.1:{httpd.server_port}/v1"
    try:
        yield FakeChatServer
    finally:
        httpd.shutdown()
        httpd.server_close()


def client_for(server: type[FakeChatServer], **options: Any) -> ChatClient:
    options = {"backoff_seconds": 0, "timeout_seconds": 0.5, "usage": Usage()} | options
    return ChatClient(base_url=server.url, api_key="sk-stub", model="m", **options)


@pytest.fixture
def chat(server, monkeypatch) -> ChatClient:
    """The stub as the configured chat model of summaries and extraction."""
    client = client_for(server)
    for module in (summaries, consolidation):
        monkeypatch.setattr(module, "configured_chat", lambda: client)
    return client


MEMORIES = '{"memories": [{"type": "preference", "content": "prefers green tea"}]}'


def test_it_asks_for_a_json_object_and_reads_the_memories_and_tokens(server):
    server.script = [said(MEMORIES)]
    client = client_for(server)

    extracted = llm_extract(client, ["the user likes green tea"])

    assert [(e.memory_type, e.content) for e in extracted] == [("preference", "prefers green tea")]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["response_format"] == {"type": "json_object"}
    assert "the user likes green tea" in request["messages"][0]["content"]
    counts = client.usage.counts()
    assert (counts.calls, counts.failures, counts.prompt_tokens, counts.completion_tokens) == (
        1,
        0,
        120,
        30,
    )
    assert counts.last_latency_ms is not None and counts.report()["mean_latency_ms"] >= 0


@pytest.mark.parametrize(
    "bad",
    [
        "I cannot help with that.",
        '[{"type": "fact", "content": "an array, not the object asked for"}]',
        '{"memories": "none"}',
        '{"memories": [{"type": "fact", "content": 42}]}',
        '{"memories": [{"kind": "fact", "text": "x"}]}',
        '{"memories": [{"type": "fact", "content": "x"}',
    ],
)
def test_an_answer_of_the_wrong_shape_is_asked_again_once(server, bad):
    server.script = [said(bad), said(MEMORIES)]
    client = client_for(server)

    extracted = llm_extract(client, ["a summary"])

    assert [e.content for e in extracted] == ["prefers green tea"]
    assert len(server.requests) == 2
    assert (client.usage.counts().calls, client.usage.counts().invalid_answers) == (2, 1)


def test_items_of_unknown_memory_types_or_blank_content_are_left_out(server):
    server.script = [
        said(
            '{"memories": [{"type": "gossip", "content": "x"}, {"type": "fact", "content": " "},'
            ' {"type": "decision", "content": "use PostgreSQL"}]}'
        )
    ]
    extracted = llm_extract(client_for(server), ["a summary"])
    assert [(e.memory_type, e.content) for e in extracted] == [("decision", "use PostgreSQL")]


def test_a_wrong_answer_twice_raises_invalid_answer(server):
    server.script = [said("nope"), said('{"memories": null}')]
    with pytest.raises(InvalidAnswer, match="not valid JSON, twice"):
        llm_extract(client_for(server), ["a summary"])


@pytest.mark.django_db
def test_twice_a_wrong_answer_the_rules_extract_and_the_run_says_so(server, chat):
    add_message("I prefer green tea.", summarize=False)
    ShortTermMemory.objects.create(agent_id="a1", session_id="s1", content="a summary")
    server.script = [said("nope"), said("still nope")]

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (run.status, run.extractor, run.created) == ("done", "rules", 1)
    assert run.reason == (
        "the chat model's answer was not valid JSON, twice: the rules extracted instead"
    )
    assert LongTermMemory.objects.get().content == "I prefer green tea."
    assert (chat.usage.counts().invalid_answers, chat.usage.counts().fallbacks) == (2, 1)


@pytest.mark.django_db
def test_an_unreachable_model_leaves_summaries_and_extraction_to_the_offline_path(monkeypatch):
    client = ChatClient(  # nothing listens on port 9 (discard)
        base_url="http://127.0.0.1:9/v1",
        api_key=None,
        model="m",
        backoff_seconds=0,
        usage=Usage(),
    )
    for module in (summaries, consolidation):
        monkeypatch.setattr(module, "configured_chat", lambda: client)
    add_message("I prefer green tea.")
    (summary,) = summarize_turns([add_message("Noted.", role="assistant")])

    run = consolidate_session(agent_id="a1", session_id="s1")

    assert (summary.content, summary.summarizer) == (
        "user: I prefer green tea. / assistant: Noted.",
        "offline",
    )
    assert (run.status, run.extractor, run.created) == ("done", "rules", 1)
    assert run.reason.startswith("chat model unreachable: ConnectError")
    assert run.reason.endswith(": the rules extracted instead")
    counts = client.usage.counts()
    assert (counts.calls, counts.failures, counts.fallbacks) == (6, 6, 2)  # 3 attempts each


@pytest.mark.django_db
def test_a_summary_by_the_model_records_its_summarizer(server, chat):
    server.script = [said("用户喜欢绿茶。")]
    add_message("我喜欢绿茶")
    (summary,) = summarize_turns([add_message("好的。", role="assistant")])

    assert (summary.content, summary.summarizer) == ("用户喜欢绿茶。", "llm")
    assert "response_format" not in server.requests[0]  # a sentence, not JSON


def test_a_timeout_is_retried(server):
    server.script = [Step(delay=1.0), said("fine")]
    client = client_for(server, timeout_seconds=0.3)

    assert client.complete("hello") == "fine"
    counts = client.usage.counts()
    assert (counts.calls, counts.failures, counts.answered) == (2, 1, 1)


def test_a_429_waits_as_long_as_retry_after_says(server):
    server.script = [Step({"error": "slow down"}, 429, {"Retry-After": "1"}), said("fine")]
    client = client_for(server)  # no backoff of its own

    started = time.monotonic()
    assert client.complete("hello") == "fine"

    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        ("0.5", 0.5),
        ("3600", 60.0),  # at most a minute: the worker has other work
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date already past
        ("soon", None),
        ("", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date_and_capped(value, seconds):
    response = httpx.Response(429, headers={"Retry-After": value} if value else {})
    assert retry_after_seconds(response) == seconds


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_retried_then_given_up(server, status):
    server.script = [Step({"error": "boom"}, status), said("fine")]
    client = client_for(server)
    assert client.complete("hello") == "fine"

    server.script = [Step({"error": "boom"}, status)] * 3
    with pytest.raises(LLMError, match=f"answered {status}"):
        client.complete("hello")
    assert client.usage.counts().failures == 4


def test_a_refused_key_or_request_is_not_retried(server):
    server.script = [Step({"error": "bad key"}, 401), Step({"error": "no such model"}, 404)]
    client = client_for(server)
    with pytest.raises(LLMError, match="401: the API key was refused"):
        client.complete("hello")
    with pytest.raises(LLMError, match="404"):
        client.complete("hello")
    assert len(server.requests) == 2


def test_a_server_refusing_response_format_is_asked_without_it_from_then_on(server):
    refusal = {"error": {"message": "Unrecognized request argument: response_format"}}
    server.script = [Step(refusal, 400), said(MEMORIES), said(MEMORIES)]
    client = client_for(server)

    assert llm_extract(client, ["a summary"])[0].content == "prefers green tea"
    assert llm_extract(client, ["another summary"])[0].content == "prefers green tea"

    assert ["response_format" in r for r in server.requests] == [True, False, False]
    assert client.json_mode is False
    assert (client.usage.counts().calls, client.usage.counts().failures) == (3, 1)


def test_another_400_is_not_taken_for_a_refused_response_format(server):
    server.script = [Step({"error": "context too long"}, 400)]
    client = client_for(server)
    with pytest.raises(LLMError, match="context too long"):
        client.complete("hello", json_object=True)
    assert client.json_mode is True and len(server.requests) == 1


def test_the_configured_chat_model_comes_from_the_llm_settings(settings):
    settings.ORCA = dataclasses.replace(
        settings.ORCA,
        llm_provider="ollama",
        llm_base_url="http://127.0.0.1:11434/v1",
        llm_api_key=None,
        llm_model="qwen2.5:7b",
        llm_timeout_seconds=120,
    )
    chat = llm.configured_chat()
    assert (chat.provider, chat.host, chat.model) == ("ollama", "127.0.0.1:11434", "qwen2.5:7b")
    settings.ORCA = dataclasses.replace(settings.ORCA, llm_provider="none")
    assert llm.configured_chat() is None


def test_health_shows_a_base_urls_host_only():
    assert llm.host_of("https://user:sk-secret@llm.example:8443/v1?key=sk-secret") == (
        "llm.example:8443"
    )
    assert llm.host_of("https://api.openai.com/v1") == "api.openai.com"


@pytest.fixture
def worker_beat(settings) -> Iterator[None]:
    """A running worker's heartbeat reporting its chat model calls."""
    beat = heartbeat.Beat(
        worker_id="worker-llm",
        pid=1,
        at=datetime.now(tz=UTC),
        state="polling",
        chat=Counts(calls=4, failures=1, fallbacks=1, answered=3, latency_ms_total=300.0),
    )
    heartbeat.write(beat)
    yield
    heartbeat.remove("worker-llm")


@pytest.mark.django_db
def test_health_counts_the_calls_of_this_process_and_of_the_workers(
    settings, server, client, worker_beat
):
    settings.ORCA = dataclasses.replace(
        settings.ORCA,
        llm_provider="custom",
        llm_base_url=server.url,
        llm_api_key="sk-stub-secret",
        llm_model="stub-chat",
    )
    before = llm.USAGE.counts()
    server.script = [said("用户喜欢绿茶。", tokens=(50, 7))]
    add_message("我喜欢绿茶")
    summarize_turns([add_message("好的。", role="assistant")])  # asks the model

    report = client.get("/api/v1/health").json()["llm"]

    assert {k: report[k] for k in ("configured", "provider", "host", "model")} == {
        "configured": True,
        "provider": "custom",
        "host": server.url.split("/")[2],
        "model": "stub-chat",
    }
    here = report["this_process"]
    assert here["calls"] - before.calls == 1
    assert here["prompt_tokens"] - before.prompt_tokens == 50
    assert here["completion_tokens"] - before.completion_tokens == 7
    assert here["last_latency_ms"] is not None
    assert report["workers"] == {
        "calls": 4,
        "failures": 1,
        "invalid_answers": 0,
        "fallbacks": 1,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "mean_latency_ms": 100.0,
        "last_latency_ms": None,
    }
    assert "sk-stub-secret" not in json.dumps(report)


@pytest.mark.django_db
def test_health_says_offline_without_a_chat_model(client):
    report = client.get("/api/v1/health").json()["llm"]
    assert (report["configured"], report["provider"], report["host"], report["model"]) == (
        False,
        "none",
        None,
        None,
    )


def test_a_workers_heartbeat_carries_its_chat_model_counts(server):
    client = client_for(server, usage=llm.USAGE)
    server.script = [said("fine", tokens=(11, 2))]
    client.complete("hello")
    heart = heartbeat.Heart("worker-counts")
    try:
        heart.beat()
        (beat,) = [b for b in heartbeat.beats() if b.worker_id == "worker-counts"]
    finally:
        heartbeat.remove("worker-counts")
    assert beat.chat == llm.USAGE.counts()
    assert beat.chat.prompt_tokens >= 11 and beat.chat.answered >= 1
