"""The vector index and the lexical index: the interface the flows use, whichever the engine.

Both return `Hit`s (a base-table id and a score, higher is better); callers load the rows
through the ORM, still scoped to the agent. The interface is small on purpose (create, put,
delete, KNN, lexical search, and reading vectors in id order to copy a store) and checks its
arguments here, once; each engine's SQL is in its own module, chosen by the connection's
vendor: `index_sqlite` (vec0, FTS5) and `index_postgres` (pgvector, tsvector).
What both index, and how a query reads, is `index_schema`. The few queries that are the same
SQL on both engines (a message's neighbours, reading vectors) are here. What an engine module
provides is declared once, `IndexEngine`; tests/test_index_engines.py holds both to it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from django.db import close_old_connections, connections

from memory import index_postgres, index_sqlite
from memory.index_schema import (
    CONTEXT_MESSAGES,
    FILTER_OPERATORS,
    KNN_MAX_K,
    LEXICAL_TABLES,
    MEMORY_TEXT,
    MEMORY_VECTORS,
    MESSAGE_TEXT,
    MESSAGE_VECTORS,
    SUMMARY_TEXT,
    SUMMARY_VECTORS,
    VECTOR_TABLES,
    Filter,
    Hit,
    KnnPath,
    LexicalTable,
    VectorIndexStatus,
    VectorRow,
    VectorTable,
)

__all__ = [
    "KNN_MAX_K",
    "LEXICAL_TABLES",
    "MEMORY_TEXT",
    "MEMORY_VECTORS",
    "MESSAGE_TEXT",
    "MESSAGE_VECTORS",
    "SUMMARY_TEXT",
    "SUMMARY_VECTORS",
    "VECTOR_TABLES",
    "Filter",
    "Hit",
    "KnnPath",
    "LexicalTable",
    "VectorIndexStatus",
    "VectorRow",
    "VectorTable",
]


def _check_filters(table_name: str, columns: Collection[str], filters: Sequence[Filter]) -> None:
    for column, op, _ in filters:
        if column not in columns or op not in FILTER_OPERATORS:
            raise ValueError(f"cannot filter {table_name} on {column} {op}")


class IndexEngine(Protocol):
    """What an engine module provides: the functions below call it with their arguments
    checked, every one passed by name (the engines' own defaults are never relied on). A
    module satisfies it as a type checker reads modules; tests/test_index_engines.py checks
    both engines' signatures against it, and that this module calls nothing else of them."""

    EMBEDDING_READ: str  # the SQL expression vector_rows selects an embedding with
    # Whether the engine answers in a server process of its own: a query sent on another
    # connection then runs beside the caller's work (`started`).
    ANSWERS_APART: bool

    def prepare_connection(self, *, connection: Any) -> None: ...

    def database_report(self, *, using: str) -> dict[str, object]: ...

    def memory_index_report(self) -> dict[str, object]: ...

    def knn_path(self, *, using: str) -> KnnPath: ...

    def drop_saved_graphs(self, *, agent_id: str, using: str) -> None: ...

    def create_vector_tables(self, *, dimension: int, search_index: bool, using: str) -> None: ...

    def drop_vector_tables(self, *, using: str) -> None: ...

    def vectors_exist(self, *, using: str) -> bool: ...

    def vector_index_status(self, *, using: str) -> VectorIndexStatus: ...

    def vectors_put(self, table: VectorTable, rows: Sequence[VectorRow], *, using: str) -> None: ...

    def maintain_agent_indexes(self, *, using: str) -> list[str]: ...

    # What the database returns for EMBEDDING_READ: bytes (SQLite), text (PostgreSQL).
    def embedding_from_db(self, value: Any) -> list[float]: ...

    def vector_delete(self, table: VectorTable, row_ids: Iterable[int], *, using: str) -> None: ...

    def knn(
        self,
        table: VectorTable,
        *,
        agent_id: str,
        embedding: Sequence[float],
        k: int,
        filters: Sequence[Filter],
        using: str,
    ) -> list[Hit]: ...

    def similarities(
        self,
        table: VectorTable,
        *,
        agent_id: str,
        embedding: Sequence[float],
        row_ids: Collection[int],
        using: str,
    ) -> list[Hit]: ...

    def lexical_search(
        self,
        table: LexicalTable,
        *,
        agent_id: str,
        query: str,
        k: int,
        session_id: str | None,
        filters: Sequence[Filter],
        exclude: Collection[int],
        now: datetime | None,
        using: str,
    ) -> list[Hit]: ...


_ENGINES: dict[str, IndexEngine] = {"sqlite": index_sqlite, "postgresql": index_postgres}


def _engine(using: str) -> IndexEngine:
    return _ENGINES[connections[using].vendor]


def prepare_connection(*, connection: Any, **_: Any) -> None:
    """`connection_created` receiver: what the engine's indexes need on every connection."""
    _ENGINES[connection.vendor].prepare_connection(connection=connection)


def database_report(*, using: str = "default") -> dict[str, object]:
    """The engine, its version and settings that matter, for the health report."""
    return _engine(using).database_report(using=using)


def knn_path(*, using: str = "default") -> KnnPath:
    """What answers KNN here and why, for the health report: SQLite's derived index or vec0's
    scan, or pgvector. Asked only where vector_index_status says KNN can run."""
    return _engine(using).knn_path(using=using)


def memory_index_report(*, using: str = "default") -> dict[str, object]:
    """What the vector search holds in this process's memory, for the health report: SQLite's
    derived index (`memory_index`); nothing on PostgreSQL, whose HNSW lives in the server."""
    return _engine(using).memory_index_report()


def drop_saved_graphs(*, agent_id: str, using: str = "default") -> None:
    """Delete the agent's approximate graphs saved outside the database (SQLite's derived
    index, index_numpy), which hold its vectors: a forget leaves no copy (the next graph is
    built from what remains); nothing on PostgreSQL, whose indexes are in the database."""
    _engine(using).drop_saved_graphs(agent_id=agent_id, using=using)


# --- vectors -------------------------------------------------------------------------------


def create_vector_tables(
    *, dimension: int, search_index: bool = True, using: str = "default"
) -> None:
    """The vector tables, if missing. `search_index=False` leaves out PostgreSQL's HNSW index
    while a copy loads rows (built once at the end, it costs a fraction of per-row upkeep);
    calling again with it adds the index. vec0 has no separate index."""
    _engine(using).create_vector_tables(dimension=dimension, search_index=search_index, using=using)


def drop_vector_tables(*, using: str = "default") -> None:
    _engine(using).drop_vector_tables(using=using)


def maintain_agent_indexes(*, using: str = "default") -> list[str]:
    """Keep the engine's per-agent vector indexes in step with the agents' sizes, after
    embedding; the indexes built or dropped. PostgreSQL: an HNSW index of its own for an
    agent holding many message vectors (index_postgres). SQLite: none (its KNN is exact)."""
    return _engine(using).maintain_agent_indexes(using=using)


def vectors_exist(*, using: str = "default") -> bool:
    """Whether any vector table holds a vector."""
    return _engine(using).vectors_exist(using=using)


def vector_index_status(*, using: str = "default") -> VectorIndexStatus:
    """Whether KNN can run: the engine's vector extension there and every vector table present."""
    return _engine(using).vector_index_status(using=using)


def vector_put(
    table: VectorTable,
    *,
    row_id: int,
    agent_id: str,
    embedding: Sequence[float],
    metadata: dict[str, str | int],
    using: str = "default",
) -> None:
    """Insert or replace the vector of one row. Joins the caller's transaction."""
    vectors_put(table, [VectorRow(row_id, agent_id, metadata, embedding)], using=using)


def vectors_put(table: VectorTable, rows: Sequence[VectorRow], *, using: str = "default") -> None:
    """Insert or replace the vectors of several rows at once. Joins the caller's transaction."""
    for row in rows:
        if set(row.metadata) != set(table.metadata):
            raise ValueError(
                f"{table.name} needs metadata {sorted(table.metadata)}, got {sorted(row.metadata)}"
            )
        if not all(math.isfinite(x) for x in row.embedding):
            raise ValueError("embedding contains NaN or infinite values")
    _engine(using).vectors_put(table, rows, using=using)


def vector_rows(
    table: VectorTable, *, after: int = 0, batch_size: int = 500, using: str = "default"
) -> Iterator[VectorRow]:
    """Every vector of the table whose row id is above `after`, in id order (to copy a
    store); read a batch at a time, each batch one query that starts where the last ended.
    The same SQL on both engines but for how the embedding is read."""
    engine, quote = _engine(using), connections[using].ops.quote_name
    columns = ", ".join(map(quote, [table.key, "agent_id", *table.metadata]))
    sql = (
        f"SELECT {columns}, {engine.EMBEDDING_READ} FROM {quote(table.name)} "
        f"WHERE {quote(table.key)} > %s ORDER BY {quote(table.key)} LIMIT %s"
    )
    while True:
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [after, batch_size])
            batch = cursor.fetchall()
        if not batch:
            return
        for row in batch:
            metadata = dict(zip(table.metadata, row[2:-1], strict=True))
            yield VectorRow(row[0], row[1], metadata, engine.embedding_from_db(row[-1]))
        after = batch[-1][0]


def vectors_of(
    table: VectorTable, row_ids: Collection[int], *, using: str = "default"
) -> dict[int, list[float]]:
    """The vectors of these rows that have one, by row id (to export one agent's rows). The
    same SQL on both engines but for how the embedding is read; 500 ids a query."""
    engine, quote = _engine(using), connections[using].ops.quote_name
    ids, found = list(row_ids), {}
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        with connections[using].cursor() as cursor:
            cursor.execute(
                f"SELECT {quote(table.key)}, {engine.EMBEDDING_READ} FROM {quote(table.name)} "
                f"WHERE {quote(table.key)} IN ({', '.join(['%s'] * len(batch))})",
                batch,
            )
            found.update((row_id, engine.embedding_from_db(value)) for row_id, value in cursor)
    return found


def vector_delete(table: VectorTable, row_ids: Iterable[int], *, using: str = "default") -> None:
    _engine(using).vector_delete(table, row_ids, using=using)


def knn(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    k: int,
    filters: Sequence[Filter] = (),
    using: str = "default",
) -> list[Hit]:
    """The k nearest vectors of one agent, nearest first; score is the cosine similarity
    (higher is closer, as with lexical_search)."""
    if not 1 <= k <= KNN_MAX_K:
        raise ValueError(f"k must be between 1 and {KNN_MAX_K}")
    _check_filters(table.name, table.metadata, filters)
    return _engine(using).knn(
        table, agent_id=agent_id, embedding=embedding, k=k, filters=filters, using=using
    )


def similarities(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    row_ids: Collection[int],
    using: str = "default",
) -> list[Hit]:
    """The cosine similarity of `embedding` to each of these rows of the agent that has a
    vector: for rows another list found (a lexical hit beyond the KNN's k), so that they are
    judged on the same scale as the nearest."""
    if not row_ids:
        return []
    return _engine(using).similarities(
        table, agent_id=agent_id, embedding=embedding, row_ids=row_ids, using=using
    )


# --- text ----------------------------------------------------------------------------------


def lexical_search(
    table: LexicalTable,
    *,
    agent_id: str,
    query: str,
    k: int,
    session_id: str | None = None,
    filters: Sequence[Filter] = (),
    exclude: Collection[int] = (),
    now: datetime | None = None,
    using: str = "default",
) -> list[Hit]:
    """The k best text matches of one agent (optionally one session); higher score is better.

    `filters` apply to the source table's `filterable` columns; `exclude` names rows that must
    not take any of the k places; with `now`, the days the query names match the date of a
    dated table's rows (index_schema.query_terms).
    """
    if session_id is not None and "session_id" not in table.scopes:
        raise ValueError(f"{table.name} has no session scope")
    if now is not None and not table.dated:
        raise ValueError(f"{table.name} has no dates to match")
    _check_filters(table.name, table.filterable, filters)
    return _engine(using).lexical_search(
        table,
        agent_id=agent_id,
        query=query,
        k=k,
        session_id=session_id,
        filters=filters,
        exclude=exclude,
        now=now,
        using=using,
    )


# --- a text query beside the caller's work -----------------------------------------------------

# PostgreSQL answers in processes of its own: a text query sent from a second thread, on that
# thread's connection, runs on the server while the caller goes on with its other work (the
# context's other layers and its KNN), and context calls took 5-37% less at p95
# (docs/BENCHMARKS.md, PostgreSQL's "Context assembly"). SQLite's indexes answer in this
# process, under its GIL: the same thread made calls no faster, so there the query runs when
# its hits are asked for. One thread per process, and so one more connection: a caller that
# finds it busy (another request of a threaded server) runs its own query. Inside a
# transaction the caller's own connection runs it: another would not see the transaction's
# writes.
_beside_free = threading.Lock()  # held while the thread runs a query
_beside: ThreadPoolExecutor | None = None  # this process's thread, made when first used


def _forget_the_parents_thread() -> None:
    """In a forked process: none of the parent's threads run there, and the lock may have been
    taken by a query the parent's thread was running. The child makes its own of both."""
    global _beside, _beside_free
    _beside, _beside_free = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_the_parents_thread)


def started(search: Callable[[], list[Hit]], *, using: str = "default") -> Callable[[], list[Hit]]:
    """An index's read (`lexical_search` with its arguments bound), started now where that
    saves time (above): its hits when called, or the error it raised."""
    connection = connections[using]
    apart = _ENGINES[connection.vendor].ANSWERS_APART
    if not apart or connection.in_atomic_block or not _beside_free.acquire(blocking=False):
        return search
    try:
        return _beside_thread().submit(_on_own_connection, search).result
    except RuntimeError:  # the interpreter is exiting: no new thread
        _beside_free.release()
        return search


def _beside_thread() -> ThreadPoolExecutor:
    global _beside
    if _beside is None:
        _beside = ThreadPoolExecutor(1, thread_name_prefix="orca-text")
    return _beside


def _on_own_connection(search: Callable[[], list[Hit]]) -> list[Hit]:
    """Run on the thread's connection, checked as a request checks its own: one broken by an
    outage or older than CONN_MAX_AGE is opened again."""
    try:
        close_old_connections()
        return search()
    finally:
        _beside_free.release()


def close_beside() -> None:
    """Close the thread's connections (a test database is dropped only without them)."""
    if _beside is None:
        return
    # At exit the interpreter ends the thread before this runs: nothing can be sent to it.
    with contextlib.suppress(RuntimeError):
        _beside.submit(connections.close_all).result()


def messages_after(message_id: int, *, using: str = "default") -> list[int]:
    """The messages after this one in its session whose `ctx` holds its text."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT n.id FROM main_messages AS n JOIN main_messages AS m "
            "ON n.agent_id = m.agent_id AND n.session_id = m.session_id "
            "WHERE m.id = %s AND (n.timestamp, n.id) > (m.timestamp, m.id) "
            "ORDER BY n.timestamp, n.id LIMIT %s",
            [message_id, CONTEXT_MESSAGES],
        )
        return [row[0] for row in cursor.fetchall()]


class Around(NamedTuple):
    before: int | None  # the message before, in the same session
    after: int | None  # the message after (for a question, usually its answer)
    after_next: int | None


def messages_around(message_ids: Iterable[int], *, using: str = "default") -> dict[int, Around]:
    """For each message, the ids of its neighbours in its session: one query, each lookup a
    step along the (agent, session, timestamp) index."""
    ids = list(message_ids)
    if not ids:
        return {}
    same_session = (
        "FROM main_messages AS n WHERE n.agent_id = m.agent_id "
        "AND n.session_id = m.session_id AND (n.timestamp, n.id) "
    )
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, (SELECT n.id {same_session} < (m.timestamp, m.id) "
            "ORDER BY n.timestamp DESC, n.id DESC LIMIT 1), "
            f"(SELECT n.id {same_session} > (m.timestamp, m.id) "
            "ORDER BY n.timestamp, n.id LIMIT 1), "
            f"(SELECT n.id {same_session} > (m.timestamp, m.id) "
            "ORDER BY n.timestamp, n.id LIMIT 1 OFFSET 1) "
            f"FROM main_messages AS m WHERE m.id IN ({', '.join(['%s'] * len(ids))})",
            ids,
        )
        return {row[0]: Around(*row[1:]) for row in cursor.fetchall()}


def reindex_messages(message_ids: Iterable[int], *, using: str = "default") -> None:
    """Recompute the FTS rows of these messages, `ctx` included.

    For changes the triggers do not watch (the speaker in `metadata`) or cannot see (another
    message's text in `ctx`). Setting content to itself fires the update trigger on each row.
    """
    with connections[using].cursor() as cursor:
        cursor.executemany(
            "UPDATE main_messages SET content = content WHERE id = %s",
            [[i] for i in message_ids],
        )
