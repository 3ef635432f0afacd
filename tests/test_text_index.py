"""SQLite's derived text index (memory.index_text): the rows and bm25 scores of FTS5's whole
query, kept current by the change log across writes and processes, so that a deleted or
edited message's old text is never found once the change has committed. Outside a
transaction recall's message query of a large agent asks the index; inside one it asks FTS5,
which is what these tests compare it with."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import textwrap
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection, transaction

from memory import index, index_sqlite, index_text
from memory.forgetting import forget_session
from memory.index import MESSAGE_TEXT
from memory.messages import message_update, messages_delete
from memory.models import MainMessage
from tests.helpers import on_this_database

pytestmark = [pytest.mark.sqlite_only, pytest.mark.django_db(transaction=True)]

WORDS = ["kiln", "pottery", "glaze", "clay", "wheel", "firing", "ash", "slip", "bowls", "tea"]
QUERIES = ("kiln pottery glaze", "clay wheel ash slip", "bowl fired kiln", "glaze", "tea 茶壶")


@pytest.fixture(autouse=True)
def _small_agents_indexed(monkeypatch):
    """The index from 40 messages (20,000 in the service), terms weighed from 50 rows."""
    monkeypatch.setattr(index_text, "MIN_ROWS", 40)
    monkeypatch.setattr(index_sqlite, "PRUNE_FROM_ROWS", 50)
    index_text.clear()
    index_sqlite.forget_term_counts()
    yield
    index_text.settle()
    index_text.clear()


_numbers = itertools.count()


def add(agent: str, count: int, *, session: str | None = None) -> list[MainMessage]:
    """Messages whose words each come in a share of the rows, some twice, some in Chinese."""
    added = []
    for _ in range(count):
        n = next(_numbers)
        words = [word for i, word in enumerate(WORDS) if n % (i + 2) == 0] * (1 + n % 3)
        added.append(
            MainMessage.objects.create(
                agent_id=agent,
                session_id=session or f"s{n // 3}",  # the two before are a reply's context
                role="user",
                content=" ".join(words) + f" note {n}" + (" 茶壶很好" if n % 5 == 0 else ""),
            )
        )
    return added


def indexed(agent: str, query: str, k: int = 20, exclude=()) -> list[tuple[int, float]]:
    """The service's answer, asserting the index gave it (no FTS5 ranking ran)."""
    statements: list[str] = []

    def spy(execute, sql, *args):
        statements.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(spy):
        hits = index.lexical_search(MESSAGE_TEXT, agent_id=agent, query=query, k=k, exclude=exclude)
    assert not [sql for sql in statements if "bm25(" in sql], "FTS5 answered"
    return [(hit.id, hit.score) for hit in hits]


def fts5(agent: str, query: str, k: int = 20, exclude=()) -> list[tuple[int, float]]:
    with transaction.atomic():  # inside a transaction FTS5 answers
        assert not index_text.answers(
            MESSAGE_TEXT.name, session_id=None, filters=(), using="default"
        )
        hits = index.lexical_search(MESSAGE_TEXT, agent_id=agent, query=query, k=k, exclude=exclude)
    return [(hit.id, hit.score) for hit in hits]


def built(agent: str) -> None:
    """The agent's index, built as a server's first query starts it (FTS5 answers that one)."""
    index.lexical_search(MESSAGE_TEXT, agent_id=agent, query="warm", k=1)
    index_text.settle()


def assert_same(agent: str, *, exclude=()) -> None:
    for query in QUERIES:
        for k in (5, 200):
            found, expected = indexed(agent, query, k, exclude), fts5(agent, query, k, exclude)
            assert [row for row, _ in found] == [row for row, _ in expected], (query, k)
            assert [score for _, score in found] == pytest.approx(
                [score for _, score in expected], rel=1e-12
            )


def test_it_answers_as_fts5_with_several_agents_through_inserts_edits_and_deletes():
    small = add("a3", 10)  # under MIN_ROWS: FTS5 answers it
    first = add("a1", 60)
    add("a2", 45)
    built("a1")
    built("a2")
    assert index_text.report().indexes == 2
    assert_same("a1", exclude=[first[0].pk, first[6].pk])
    assert_same("a2")

    newer = add("a1", 5) + add("a2", 3)  # another agent's rows move the idf too
    assert_same("a1")
    assert_same("a2")
    message_update(first[4], content="glaze tea kiln kiln")  # its context rows are reindexed
    message_update(newer[0], metadata={"speaker": "Ann"})
    messages_delete(messages=MainMessage.objects.filter(pk__in=[first[2].pk, newer[-1].pk]))
    assert_same("a1")
    assert_same("a2")
    statements: list[str] = []
    with connection.execute_wrapper(lambda ex, sql, *a: statements.append(sql) or ex(sql, *a)):
        index.lexical_search(MESSAGE_TEXT, agent_id="a3", query="kiln", k=5)
    assert any("bm25(" in sql for sql in statements)  # a small agent: FTS5
    assert small


def test_an_edited_or_forgotten_message_is_never_found_by_its_old_text():
    messages = add("a1", 50, session="s1") + add("a1", 5, session="s2")
    built("a1")
    message_update(messages[10], content="a rare secret word: zymurgy")
    # The row, and the two after it holding it in their context.
    assert sorted(row for row, _ in indexed("a1", "zymurgy")) == [m.pk for m in messages[10:13]]
    message_update(messages[10], content="nothing here")
    assert indexed("a1", "zymurgy") == []  # neither the row nor its successors' context
    message_update(messages[52], content="zymurgy again")
    assert sorted(row for row, _ in indexed("a1", "zymurgy")) == [m.pk for m in messages[52:55]]

    forget_session(agent_id="a1", session_id="s2", actor="test")

    assert indexed("a1", "zymurgy") == [] == fts5("a1", "zymurgy")


def test_a_days_phrase_and_a_session_scope_are_answered_by_fts5():
    add("a1", 50)
    built("a1")
    statements: list[str] = []
    with connection.execute_wrapper(lambda ex, sql, *a: statements.append(sql) or ex(sql, *a)):
        index.lexical_search(
            MESSAGE_TEXT, agent_id="a1", query="kiln on May 2", k=5, now=datetime.now(UTC)
        )
        index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="kiln", k=5, session_id="s1")
    assert len([sql for sql in statements if "bm25(" in sql]) == 2


def test_an_index_behind_the_pruned_log_is_built_again():
    messages = add("a1", 50, session="s1")
    built("a1")
    with connection.cursor() as cursor:  # a process that looked away while the log moved on
        cursor.execute(f"DELETE FROM {index_text.CHANGES}")
    message_update(messages[3], content="zymurgy")
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {index_text.CHANGES}")
    MainMessage.objects.create(agent_id="a1", session_id="s9", role="user", content="later")

    assert sorted(row for row, _ in fts5("a1", "zymurgy")) == [m.pk for m in messages[3:6]]
    assert index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="zymurgy", k=5)  # FTS5
    index_text.settle()
    assert sorted(row for row, _ in indexed("a1", "zymurgy")) == [m.pk for m in messages[3:6]]


def test_many_changes_build_it_again_and_it_answers_meanwhile(monkeypatch):
    monkeypatch.setattr(index_text, "REBUILD_SHARE", 0.01)
    add("a1", 50)
    built("a1")
    add("a1", 1001)
    assert_same("a1")  # caught up from the log; a new build started
    index_text.settle()
    assert index_text.report().rows == MainMessage.objects.count()
    assert_same("a1")


def test_the_terms_it_keeps_stay_within_their_cap(monkeypatch):
    monkeypatch.setattr(index_text, "MAX_KEPT_TERMS", 3)
    add("a1", 50)
    add("a2", 10)  # other agents' counts are kept too
    built("a1")
    assert_same("a1")
    (kept,) = index_text._CACHE.indexes.values()
    assert 0 < len(kept.matches) <= 3 and 0 < len(kept.others) <= 3


def entries(after: int) -> list[tuple[str, int]]:
    """The log's entries after `after`'s, as (agent, message)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT agent_id, row_id FROM {index_text.CHANGES} WHERE id > %s ORDER BY id",
            [after],
        )
        return cursor.fetchall()


def test_every_write_of_a_messages_text_is_logged_in_its_transaction():
    with connection.cursor() as cursor:  # earlier tests' entries stay: the log is no model
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {index_text.CHANGES}")
        (seen,) = cursor.fetchone()
    read = 0

    def logged() -> list[tuple[str, int]]:
        """The entries written since the last call."""
        nonlocal read
        new = entries(seen)[read:]
        read += len(new)
        return new

    first, second = add("a1", 2, session="s1")
    assert logged() == [("a1", first.pk), ("a1", second.pk)]
    message_update(first, content="edited")  # then reindexed, with the next one's context
    assert set(logged()) == {("a1", first.pk), ("a1", second.pk)}
    MainMessage.objects.filter(pk=second.pk).update(role="assistant")  # no text changed
    assert logged() == []
    MainMessage.objects.filter(pk=second.pk).update(agent_id="a2")
    assert logged() == [("a1", second.pk), ("a2", second.pk)]
    with pytest.raises(RuntimeError), transaction.atomic():
        MainMessage.objects.filter(pk=first.pk).delete()
        raise RuntimeError  # rolled back: neither the delete nor its entry
    assert logged() == []
    MainMessage.objects.filter(pk=first.pk).delete()
    assert logged() == [("a1", first.pk)]


def test_an_agent_is_answered_by_fts5_when_the_index_is_off(monkeypatch):
    monkeypatch.setattr(settings, "ORCA", dataclasses.replace(settings.ORCA, text_index_mb=0))
    assert not index_text.answers(MESSAGE_TEXT.name, session_id=None, filters=(), using="default")


def test_an_agent_over_the_memory_bound_is_answered_by_fts5(monkeypatch):
    add("a1", 50)
    monkeypatch.setattr(index_text, "_limit", lambda: 10_000)  # smaller than its index
    built("a1")
    assert index_text.report().indexes == 0
    found = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query="kiln clay", k=5)
    assert [(hit.id, hit.score) for hit in found] == fts5("a1", "kiln clay", 5)


def stopped(process: subprocess.Popen) -> str:
    """A failed check's message: the process's errors (it is stopped first: it may wait)."""
    process.kill()
    return process.communicate()[1]


@pytest.mark.slow
def test_another_process_sees_a_delete_at_once(tmp_path):
    """A process with its index built; this one deletes and edits messages: its next answer
    has neither the deleted rows nor the old text."""
    messages = add("a1", 50, session="s1")
    message_update(messages[20], content="zymurgy in the cellar")
    script = textwrap.dedent(
        """
        import sys
        import django
        django.setup()
        from memory import index, index_sqlite, index_text
        index_text.MIN_ROWS = 40
        def ids(query):
            hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=query, k=50)
            return sorted(hit.id for hit in hits)
        ids("warm")
        index_text.settle()
        print(index_text.report().indexes, ids("zymurgy"), flush=True)
        sys.stdin.readline()  # the test process deletes and edits meanwhile
        print(index_text.report().indexes, ids("zymurgy"), ids("kiln"), flush=True)
        """
    )
    other = on_this_database(script)
    try:
        before = other.stdout.readline().strip()
        assert before == f"1 {[m.pk for m in messages[20:23]]}", stopped(other)
        kiln = [m.pk for m in messages if "kiln" in m.content]
        messages_delete(messages=MainMessage.objects.filter(pk=kiln[0]))
        message_update(messages[20], content="nothing")
        other.stdin.write("\n")
        other.stdin.flush()
        after = other.stdout.readline().strip()
        expected = sorted(row for row, _ in fts5("a1", "kiln", 50))
        assert kiln[0] not in expected
        assert after == f"1 [] {expected}", stopped(other)
    finally:
        other.kill()
        other.wait()
