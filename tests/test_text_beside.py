"""Recall's text query started before the context's other layers (index.started):
on PostgreSQL it runs in a thread of its own, on that thread's connection, beside the caller's
work; elsewhere, inside a transaction or with that thread busy, in the caller's thread. Either
way the context is the same."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import OperationalError, connection, transaction

from bench.tempdb import create_database, drop_database
from memory import index, index_postgres, index_sqlite
from memory.context import context_build
from memory.search import SearchQuery, search, start_text_search
from tests.factories import add_message
from tests.fakes import FakeEmbedder

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's server")

START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
ENGINE = index_postgres if connection.vendor == "postgresql" else index_sqlite


def past_sessions() -> None:
    """Two earlier sessions and the current one, user and assistant turns a minute apart."""
    lines = {
        "s1": ["I adopted a grey cat called Miso.", "Miso is a lovely name for a cat!"],
        "s2": ["My sister lives in Lisbon now.", "Lisbon is sunny most of the year."],
        "now": ["Good morning!", "Good morning, how can I help?"],
    }
    at = START
    for session, texts in lines.items():
        for n, text in enumerate(texts):
            add_message(
                text,
                role="user" if n % 2 == 0 else "assistant",
                session_id=session,
                agent_id="a1",
                timestamp=at,
                summarize=False,
            )
            at += timedelta(minutes=1)


@pytest.fixture
def text_threads(monkeypatch) -> list[str]:
    """The thread each of the message index's text queries ran in."""
    ran: list[str] = []
    search = ENGINE.lexical_search

    def spy(table, **kwargs):
        if table is index.MESSAGE_TEXT:
            ran.append(threading.current_thread().name)
        return search(table, **kwargs)

    monkeypatch.setattr(ENGINE, "lexical_search", spy)
    return ran


def build():
    return context_build(
        agent_id="a1",
        session_id="now",
        query="What is my cat called?",
        model_window=8192,
        embedder=FakeEmbedder(),
    )


def recalled(context) -> list[int]:
    return [item.id for item in context.layers["recall"].items]


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_recall_text_query_runs_beside_the_caller_with_the_same_context(
    text_threads, monkeypatch
):
    past_sessions()
    beside = build()
    assert len(text_threads) == 1
    assert text_threads[0].startswith("orca-text")
    monkeypatch.setattr(index_postgres, "ANSWERS_APART", False)
    inline = build()
    assert text_threads[1] == threading.current_thread().name
    assert recalled(beside) == recalled(inline) and recalled(beside)
    assert beside.messages == inline.messages


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_with_the_thread_busy_the_caller_runs_its_own_query(text_threads):
    past_sessions()
    assert index._beside_free.acquire(blocking=False)  # another request's query
    try:
        busy = build()
    finally:
        index._beside_free.release()
    assert text_threads == [threading.current_thread().name]
    assert recalled(busy) == recalled(build())
    assert text_threads[1].startswith("orca-text")


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_an_error_in_the_thread_reaches_the_caller_and_frees_the_thread(monkeypatch):
    past_sessions()
    search_as_before = index_postgres.lexical_search

    def gone(table, **kwargs):
        raise OperationalError("the server closed the connection")

    monkeypatch.setattr(index_postgres, "lexical_search", gone)
    with pytest.raises(OperationalError, match="closed the connection"):
        search(agent_id="a1", query=SearchQuery("cat"))
    assert index._beside_free.acquire(blocking=False)  # the thread is free again
    index._beside_free.release()
    monkeypatch.setattr(index_postgres, "lexical_search", search_as_before)
    hits = search(agent_id="a1", query=SearchQuery("cat", mode="lexical")).hits
    assert [hit.message.content for hit in hits] == [
        "I adopted a grey cat called Miso.",
        "Miso is a lovely name for a cat!",
    ]


@pytest.mark.django_db
def test_inside_a_transaction_the_caller_runs_the_query(text_threads):
    past_sessions()
    with transaction.atomic():  # another connection would not see its writes
        add_message("My cat Miso is three years old.", session_id="s3", agent_id="a1")
        context = build()
    assert text_threads == [threading.current_thread().name]
    texts = [item.line for item in context.layers["recall"].items]
    assert any("three years old" in text for text in texts)


@pytest.mark.skipif(connection.vendor == "postgresql", reason="SQLite's indexes")
@pytest.mark.django_db(transaction=True)
def test_on_sqlite_the_caller_runs_the_query(text_threads):
    past_sessions()
    build()
    assert text_threads == [threading.current_thread().name]


@pytest.mark.django_db(transaction=True)
def test_a_text_search_started_for_another_query_is_not_taken():
    past_sessions()
    now = datetime.now(UTC)
    asked = SearchQuery("sister Lisbon", mode="lexical")
    started = start_text_search(agent_id="a1", query=SearchQuery("cat", mode="lexical"), now=now)
    taken = search(agent_id="a1", query=asked, now=now, text=started).hits
    assert [hit.message.content for hit in taken] == [
        hit.message.content for hit in search(agent_id="a1", query=asked, now=now).hits
    ]
    assert taken[0].message.content == "My sister lives in Lisbon now."
    # Working memory cut after the query started: the ids it left out differ.
    cut = SearchQuery("cat", mode="lexical", exclude_ids=frozenset({1}))
    hits = search(agent_id="a1", query=cut, now=now, text=started).hits
    assert 1 not in [hit.message.pk for hit in hits]


# What is tested is the fork of a process with threads, which Python warns of.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_process_forked_while_the_thread_ran_a_query_makes_its_own_thread_and_lock():
    """A server worker forked from a process whose thread was busy: the thread does not run
    in the child, and the lock it held would stay taken there for good."""
    parent = index._beside_thread()
    assert index._beside_free.acquire(blocking=False)  # the parent's thread runs a query
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answers through the pipe, and never returns to pytest
            try:
                lock_free = index._beside_free.acquire(blocking=False)
                own = index._beside_thread()
                answer = f"{lock_free} {own is not parent} {own.submit(os.getpid).result()}"
                os.write(write, answer.encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
    finally:
        index._beside_free.release()
    assert answer == f"True True {pid}"
    assert index._beside_thread() is parent


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_a_dropped_connection_of_the_thread_is_opened_again(text_threads):
    """The server ended the thread's connection between two calls (a restart, an idle
    timeout): the next call's query opens a new one, as a request's own connection would."""
    past_sessions()
    first = build()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchall()  # the thread's connection was there
    again = build()
    assert text_threads[1].startswith("orca-text")
    assert recalled(again) == recalled(first) and recalled(again)


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_at_exit_a_temporary_database_is_dropped_though_the_thread_left_its_connection(
    monkeypatch,
):
    """An evaluation's temporary database is dropped at exit (bench.tempdb), after the
    interpreter ended the thread: its connection may still be open, and close_beside can no
    longer reach it."""
    name = create_database("beside")
    params = {**connection.get_connection_params(), "dbname": name}
    left_open = psycopg.connect(**params)  # what the ended thread's connection leaves
    ended = ThreadPoolExecutor(1)
    ended.shutdown()
    monkeypatch.setattr(index, "_beside", ended)
    try:
        drop_database(name)
    finally:
        left_open.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name])
        assert cursor.fetchone() == (0,)
