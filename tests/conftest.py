from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone, translation


@pytest.fixture
def sql():
    """Run one statement on the test database as plain SQL and return its rows."""

    def run(statement: str, params: list[object] | tuple[object, ...] = ()) -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    return run


@pytest.fixture(autouse=True)
def _the_default_language_after_each_test():
    """A request in Chinese (a cookie, Accept-Language) leaves the thread's language active
    after its response: the next test would read translated messages."""
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _fresh_index_tables_after_transactional_tests(request):
    """Django flushes model tables after a transactional test; the index tables need it too.
    On PostgreSQL the flush is a TRUNCATE, which fires no trigger: the text index is emptied
    here, or a later test's search would find the flushed rows' ids."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker and marker.kwargs.get("transaction"):
        from django.conf import settings

        from memory import index, index_postgres, index_sqlite

        # The connection of the thread that runs text queries beside a context call (kept
        # only outside transactions): the test database is dropped only without it.
        index.close_beside()
        # Kept only outside transactions: by such tests.
        index_sqlite.forget_term_counts()
        index_postgres.forget_term_counts()
        index.drop_vector_tables()
        index.create_vector_tables(dimension=settings.ORCA.embedding_dim)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {', '.join(t.name for t in index.LEXICAL_TABLES)}")


class ApiClient:
    """Django's test client speaking JSON to /api/v1 with one agent's bearer key."""

    def __init__(self, client, key: str | None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def _call(self, method: str, path: str, body=None, **extra):
        kwargs = {"headers": self.headers, **extra}
        if body is not None:
            kwargs.update(
                data=body if isinstance(body, bytes | str) else json.dumps(body),
                content_type="application/json",
            )
        return getattr(self.client, method)(f"/api/v1{path}", **kwargs)

    def get(self, path: str, **query):
        return self._call("get", path, None, query_params=query)

    def post(self, path: str, body=None):
        return self._call("post", path, body)

    def patch(self, path: str, body=None):
        return self._call("patch", path, body)

    def delete(self, path: str):
        return self._call("delete", path)


@pytest.fixture
def api_for(client, db):
    """api_for("agent-a") -> an ApiClient with a fresh key for that agent."""
    from memory.auth import api_key_create

    def make(agent_id: str) -> ApiClient:
        return ApiClient(client, api_key_create(agent_id=agent_id)[1])

    return make


@pytest.fixture
def api(api_for):
    return api_for("agent-a")


@pytest.fixture
def fake_embedder(monkeypatch):
    """Make a FakeEmbedder the configured provider for the test."""
    from memory import embeddings, vectors
    from tests.fakes import FakeEmbedder

    embedder = FakeEmbedder()
    monkeypatch.setattr(embeddings, "configured_embedder", lambda: embedder)
    vectors.query_vector.cache_clear()
    return embedder


@pytest.fixture
def conversation(db):
    """A session of agent-a with a truncated sub-agent run, a summary and two memories."""
    from types import SimpleNamespace

    from memory.memories import memory_create
    from memory.models import ShortTermMemory
    from subagents.runs import subagent_finish, subagent_record
    from tests.factories import add_message

    ask = add_message(
        "Please research how to deploy Django with gunicorn.", agent_id="agent-a", session_id="s-1"
    )
    subagent_record(
        parent=ask, agent_name="researcher", role="assistant", content="Reading gunicorn docs."
    )
    # Over the 10,000-token result limit, so the stored result is cut and marked.
    result = subagent_finish(parent=ask, agent_name="researcher", content="gunicorn " * 6000)
    reply = add_message(
        "Use gunicorn behind nginx, as the researcher found.",
        role="assistant",
        agent_id="agent-a",
        session_id="s-1",
    )
    summary = ShortTermMemory.objects.create(
        agent_id="agent-a", session_id="s-1", content="The user asked how to deploy Django."
    )
    tea = memory_create(
        agent_id="agent-a",
        content="The user prefers green tea.",
        memory_type="preference",
        actor="api",
        confidence=0.7,
    )
    deploy = memory_create(
        agent_id="agent-b", content="Deploys run on Fridays.", memory_type="decision", actor="api"
    )
    return SimpleNamespace(
        ask=ask, result=result, reply=reply, summary=summary, tea=tea, deploy=deploy
    )


@pytest.fixture
def chat(monkeypatch):
    """The chat model (summaries, extraction) as a MockTransport: append `answers` (str, or
    an int: the HTTP status of a failure) in the order they are asked; `prompts` records what
    was asked."""
    import httpx

    from memory import consolidation, summaries
    from memory.llm import ChatClient

    answers: list[str] = []
    prompts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        prompts.append(json.loads(request.content)["messages"][0]["content"])
        text = answers.pop(0)
        if isinstance(text, int):  # a status the server fails with
            return httpx.Response(text, json={"error": "refused"})
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": text}}]}
        )

    client = ChatClient(
        base_url="https://llm.example.test/v1",
        api_key="sk-x",
        model="m",
        backoff_seconds=0,
        transport=httpx.MockTransport(handler),
    )
    for module in (summaries, consolidation):
        monkeypatch.setattr(module, "configured_chat", lambda: client)
    return answers, prompts


@pytest.fixture
def clock(monkeypatch):
    """Calling it moves the service's clock 31 s on: consolidation runs of one agent that far
    apart are never deferred by its 30-second window."""
    now = [timezone.now().replace(microsecond=0)]
    monkeypatch.setattr(timezone, "now", lambda: now[0])

    def advance() -> None:
        now[0] += timedelta(seconds=31)

    return advance
