"""Durable, batched, asynchronous embedding: pending rows, failures, crashes, signatures."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from memory import index, vectors
from memory.context import context_build
from memory.embeddings import EmbeddingError, InputRejected
from memory.health import service_health
from memory.models import MainMessage, VectorIndexState
from memory.search import SearchQuery, search
from tests.factories import add_message
from tests.fakes import FakeEmbedder

pytestmark = pytest.mark.django_db


def vector_ids(embedder, agent: str = "a1") -> list[int]:
    probe = embedder.embed(["probe"])[0]
    hits = index.knn(index.MESSAGE_VECTORS, agent_id=agent, embedding=probe, k=4096)
    return sorted(hit.id for hit in hits)


def test_only_user_and_assistant_messages_of_three_tokens_wait_for_a_vector():
    eligible = [
        add_message("ten chars!"),
        add_message("a long assistant reply", role="assistant"),
        add_message("喝茶"),
    ]
    add_message("short")
    add_message("a long system prompt here", role="system")
    add_message("a long tool result here", role="tool")

    # In id order: unordered, PostgreSQL may read them through the index on role.
    assert list(MainMessage.objects.awaiting_embedding().order_by("id")) == eligible
    assert [m.needs_embedding for m in eligible] == [True, True, True]


@pytest.mark.parametrize(
    ("role", "content", "tokens", "needs"),
    [
        ("user", "ok", 1, False),
        ("user", "thanks!", 2, False),
        ("user", "12345678", 2, False),
        ("user", "123456789", 3, True),  # 9 English characters
        ("user", "ten chars!", 3, True),
        ("user", "好", 2, False),
        ("user", "好的", 3, True),  # two Chinese characters
        ("assistant", "偏好", 3, True),
        ("user", "你还记得我吗？", 10, True),  # 7 characters, a whole question
        ("user", "ok 好", 3, True),
        ("assistant", "a long assistant reply", 6, True),
        ("system", "你还记得我吗？", 10, False),
        ("tool", "a long tool result here", 6, False),
    ],
)
def test_the_sql_and_python_rules_agree_on_what_is_worth_a_vector(role, content, tokens, needs):
    message = add_message(content, role=role)
    assert message.token_count == tokens
    assert message.needs_embedding is needs
    assert MainMessage.objects.awaiting_embedding().filter(pk=message.pk).exists() is needs
    # Once it has its vector, neither rule asks for another.
    MainMessage.objects.filter(pk=message.pk).update(has_embedding=True)
    message.refresh_from_db()
    assert message.needs_embedding is False
    assert not MainMessage.objects.awaiting_embedding().exists()


def test_a_short_chinese_question_gets_a_vector_and_ok_does_not(fake_embedder):
    question = add_message("你还记得我吗？")
    add_message("ok")

    assert vectors.embed_pending() == 1
    assert vector_ids(fake_embedder) == [question.pk]
    assert MainMessage.objects.get(pk=question.pk).has_embedding is True


def test_it_embeds_pending_messages_in_batches_and_flips_the_flag(fake_embedder, settings):
    messages = [add_message(f"message number {i} about tea") for i in range(7)]

    done = vectors.embed_pending(batch_size=3)

    assert done == 7
    assert [len(call) for call in fake_embedder.calls] == [3, 3, 1]
    assert not MainMessage.objects.awaiting_embedding().exists()
    assert vector_ids(fake_embedder) == [m.pk for m in messages]
    assert vectors.embed_pending(batch_size=3) == 0  # nothing twice


@pytest.mark.django_db(transaction=True)
def test_storing_a_message_queues_its_embedding_after_the_commit(fake_embedder, api):
    response = api.post(
        "/sessions/s1/messages", {"role": "user", "content": "我的偏好是每天早上喝一杯绿茶"}
    )
    api.post("/sessions/s1/messages", {"role": "user", "content": "short"})

    # The tests' task backend runs the queued task at once, after the commit.
    row = MainMessage.objects.get(pk=response.json()["id"])
    assert row.has_embedding is True
    assert response.json()["has_embedding"] is False  # answered before the embedding
    assert vector_ids(fake_embedder, agent="agent-a") == [row.pk]


def test_a_provider_outage_keeps_everything_pending_and_health_says_so(fake_embedder):
    add_message("first message to embed")
    add_message("second message to embed")
    fake_embedder.fail_times = 1

    with pytest.raises(EmbeddingError):
        vectors.embed_pending()

    assert MainMessage.objects.awaiting_embedding().count() == 2
    health = service_health()
    assert health.status == "degraded"
    assert health.embedding["failing"] is True
    assert health.embedding["last_error"] == "fake provider is down"
    assert health.embedding["pending"] == 2

    assert vectors.embed_pending() == 2  # the provider is back: the backlog drains
    health = service_health()
    assert (health.status, health.embedding["failing"], health.embedding["pending"]) == (
        "ok",
        False,
        0,
    )
    assert VectorIndexState.objects.get().last_success_at is not None


def test_a_crash_after_some_batches_leaves_the_rest_pending_and_no_duplicates(fake_embedder):
    messages = [add_message(f"message number {i} to embed") for i in range(6)]

    class CrashingEmbedder(FakeEmbedder):
        def embed(self, texts):
            if len(self.calls) == 1:
                raise KeyboardInterrupt("worker killed")
            return super().embed(texts)

    crashing = CrashingEmbedder(dimension=fake_embedder.signature.dimension)
    crashing.signature = fake_embedder.signature
    with pytest.raises(KeyboardInterrupt):
        vectors.embed_pending(embedder=crashing, batch_size=2)
    assert MainMessage.objects.awaiting_embedding().count() == 4

    assert vectors.embed_pending(batch_size=2) == 4
    assert vector_ids(fake_embedder) == [m.pk for m in messages]  # each exactly once


def test_a_row_finished_by_another_run_is_not_written_again(fake_embedder):
    message = add_message("raced by two workers")
    vectors.prepare_index(fake_embedder.signature)
    batch = [message]
    assert vectors._write(vectors.SOURCES[0], batch, fake_embedder.embed([message.content])) == 1
    assert (
        vectors._write(vectors.SOURCES[0], batch, fake_embedder.embed(["something else entirely"]))
        == 0
    )
    hits = index.knn(
        index.MESSAGE_VECTORS,
        agent_id="a1",
        embedding=fake_embedder.embed([message.content])[0],
        k=5,
    )
    assert [(h.id, round(h.score, 6)) for h in hits] == [(message.pk, 1.0)]


def test_a_text_the_provider_refuses_does_not_block_the_others(fake_embedder):
    good = add_message("a perfectly fine message")
    bad = add_message("a message the provider refuses")
    later = add_message("another fine message")

    class PickyEmbedder(FakeEmbedder):
        def embed(self, texts):
            if any("refuses" in t for t in texts):
                raise InputRejected("answered 400")
            return super().embed(texts)

    picky = PickyEmbedder(dimension=fake_embedder.signature.dimension)
    picky.signature = fake_embedder.signature

    assert vectors.embed_pending(embedder=picky, batch_size=5) == 2
    assert list(MainMessage.objects.awaiting_embedding()) == [bad]
    assert vector_ids(fake_embedder) == [good.pk, later.pk]


def test_the_tables_adopt_a_new_provider_while_empty_and_refuse_it_once_filled(fake_embedder):
    add_message("embedded by the first provider")
    vectors.embed_pending()
    other = FakeEmbedder(dimension=32, name="other")

    status = vectors.vector_search_status(other)
    assert status.enabled is False
    assert "run `python manage.py reembed`" in status.reason
    with pytest.raises(vectors.SignatureMismatch):
        vectors.embed_pending(embedder=other)
    query = "embedded provider"
    result = search(
        agent_id="a1", query=SearchQuery(query), embedded=vectors.query_embedding(query, other)
    )
    assert result.mode == "lexical" and "reembed" in result.degraded[0]

    vectors.rebuild_index(other.signature)  # what reembed does first
    assert vectors.embed_pending(embedder=other) == 1
    assert VectorIndexState.objects.get().dimension == 32
    assert vectors.vector_search_status(other).enabled


def test_before_the_workers_first_run_queries_degrade_instead_of_failing(fake_embedder):
    # The migration built the empty tables for 1024 dimensions; this provider has 384.
    add_message("I live in Lyon")
    small = FakeEmbedder(dimension=384, name="small")

    context = context_build(
        agent_id="a1", session_id="s1", query="where?", model_window=8192, embedder=small
    )
    result = search(
        agent_id="a1", query=SearchQuery("Lyon"), embedded=vectors.query_embedding("Lyon", small)
    )

    reason = f"no vectors of {small.signature} yet: the task worker prepares the index"
    assert reason in context.degraded[0] and reason in result.degraded[0]
    assert [hit.message.content for hit in result.hits] == ["I live in Lyon"]
    vectors.embed_pending(embedder=small)
    assert vectors.vector_search_status(small).enabled


def test_reembed_rebuilds_every_vector_with_the_configured_provider(fake_embedder):
    for i in range(3):
        add_message(f"message {i} for reembedding")
    vectors.embed_pending()
    out = io.StringIO()

    call_command("reembed", stdout=out, stderr=io.StringIO())

    assert "Embedded 3 messages" in out.getvalue()
    assert len(fake_embedder.calls) == 2  # the first run, then the rebuild (one batch each)
    assert not MainMessage.objects.awaiting_embedding().exists()


def test_the_commands_explain_what_they_cannot_do(fake_embedder, monkeypatch):
    add_message("waiting for a vector")
    fake_embedder.fail_times = 1
    with pytest.raises(CommandError, match="fake provider is down"):
        call_command("embed_pending", stdout=io.StringIO(), stderr=io.StringIO())

    from memory import embeddings

    monkeypatch.setattr(embeddings, "configured_embedder", lambda: None)
    with pytest.raises(CommandError, match="No embedding provider"):
        call_command("reembed", stdout=io.StringIO())


def test_the_worker_queue_holds_one_waiting_run_and_retries_later(settings, fake_embedder):
    from django_tasks_db.models import DBTaskResult

    from memory.scheduling import schedule_embedding
    from memory.tasks import embed_pending_task

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    schedule_embedding()
    schedule_embedding()
    assert DBTaskResult.objects.count() == 1

    DBTaskResult.objects.all().delete()
    add_message("a message while the provider is down")
    fake_embedder.fail_times = 1
    assert embed_pending_task.call() == 0
    retry = DBTaskResult.objects.get()
    assert retry.run_after > retry.enqueued_at  # deferred by the backoff


def test_a_run_embeds_a_bounded_number_of_rows_and_queues_the_next(fake_embedder, monkeypatch):
    from memory import scheduling, tasks

    for i in range(7):
        add_message(f"message number {i} in a backlog")
    assert vectors.embed_pending(limit=3, batch_size=2) == 4  # whole batches, up to the limit
    assert MainMessage.objects.awaiting_embedding().count() == 3

    queued = []
    monkeypatch.setattr(tasks, "ROWS_PER_RUN", 2)
    monkeypatch.setattr(scheduling, "schedule_embedding", lambda **kwargs: queued.append(kwargs))
    assert tasks.embed_pending_task.call() >= 2
    assert queued == [{}]  # a backlog remains: the next run is queued


def test_a_store_embedded_by_minilm_is_told_how_to_keep_its_vectors(fake_embedder):
    add_message("embedded before the default model changed")
    minilm = FakeEmbedder(dimension=384, name="local", model="all-MiniLM-L6-v2")
    vectors.embed_pending(embedder=minilm)

    status = vectors.vector_search_status(FakeEmbedder(dimension=896, name="local", model="x"))

    assert status.enabled is False
    assert status.reason.endswith(
        "run `python manage.py reembed`, or keep them with "
        "[embedding] model = 'all-MiniLM-L6-v2' (EMBEDDING_MODEL)"
    )
