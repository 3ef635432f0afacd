"""The vector index (sqlite-vec vec0) and the lexical index (FTS5): the only raw SQL for either.

Both return `Hit`s (a base-table id and a score); callers load the rows through the ORM, still
scoped to the agent. The interface is small on purpose (create, put, delete, KNN, lexical
search) so that a PostgreSQL + pgvector implementation can sit beside this one later.

Vectors: one vec0 table per searchable table, partitioned by `agent_id`, since every query is
scoped to one agent and KNN inside a partition scans only that agent's vectors
(docs/BENCHMARKS.md). The narrower filters are vec0 metadata columns, applied during the scan.

Text: one FTS5 table per searchable table (porter-stemmed unicode61), filled by triggers from the
base table. It holds the words of the text (`body`), its CJK unigrams and bigrams (`cjk`, see
memory.text), for messages the two messages before it (`ctx`), and the scope as
one exact token per column (`agent_id`, `session_id`: "s" + hex of the value), so that scoping
is a term of the MATCH itself rather than a join.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections

from memory import dates, text
from memory.text import cjk_terms, without_cjk
from orca_memory.db.base import VectorExtension

# vec0 scans a chunk at a time and reserves whole chunks per partition (default 1024 rows):
# 128 keeps a small agent's footprint small and made in-partition KNN fastest when measured.
CHUNK_SIZE = 128
# vec0 refuses larger k.
KNN_MAX_K = 4096
# Bounds the cost of a long pasted query: every term is one more FTS5 lookup.
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class VectorTable:
    name: str
    key: str
    metadata: dict[str, str]  # filterable column -> vec0 type


@dataclass(frozen=True)
class LexicalTable:
    """An FTS5 table over `source`: what its columns hold, as SQL over the trigger's row `{r}`."""

    name: str
    source: str
    scopes: tuple[str, ...]
    body: str
    context: str = "''"
    filterable: tuple[str, ...] = ()  # columns of `source` a search may filter on
    dated: bool = False  # `body` begins with the row's date, as message_label writes it


MESSAGE_VECTORS = VectorTable(
    "vec_main_messages",
    "msg_id",
    {"session_id": "text", "role": "text", "msg_type": "text", "created_at": "integer"},
)
SUMMARY_VECTORS = VectorTable("vec_short_term_memories", "memory_id", {"session_id": "text"})
MEMORY_VECTORS = VectorTable("vec_long_term_memories", "memory_id", {"memory_type": "text"})
VECTOR_TABLES = (MESSAGE_VECTORS, SUMMARY_VECTORS, MEMORY_VECTORS)

# A message is indexed with its date and speaker, and - in `ctx` - with the two messages
# before it in its session: an answer often shares no word with the question, but the turn it
# answers does. On LoCoMo this took evidence recall@10 from 0.46 to 0.74 (docs/EVALUATION.md).
CONTEXT_MESSAGES = 2
_PREVIOUS_MESSAGES = (
    "(SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) "
    "FROM (SELECT role, metadata, content FROM main_messages AS p "
    "WHERE p.agent_id = {r}.agent_id AND p.session_id = {r}.session_id "
    "AND (p.timestamp, p.id) < ({r}.timestamp, {r}.id) "
    f"ORDER BY p.timestamp DESC, p.id DESC LIMIT {CONTEXT_MESSAGES}) AS p)"
)
MESSAGE_TEXT = LexicalTable(
    "fts_main_messages",
    "main_messages",
    ("agent_id", "session_id"),
    body="orca_message_label({r}.timestamp, {r}.role, {r}.metadata) || {r}.content",
    context=f"orca_fts_terms({_PREVIOUS_MESSAGES})",
    filterable=("session_id", "role", "msg_type", "timestamp"),
    dated=True,
)
SUMMARY_TEXT = LexicalTable(
    "fts_short_term_memories",
    "short_term_memories",
    ("agent_id", "session_id"),
    body="{r}.content",
)
MEMORY_TEXT = LexicalTable(
    "fts_long_term_memories", "long_term_memories", ("agent_id",), body="{r}.content"
)
LEXICAL_TABLES = (MESSAGE_TEXT, SUMMARY_TEXT, MEMORY_TEXT)

TEXT_COLUMNS = ("body", "cjk", "ctx")
TEXT_WEIGHTS = ("1.0", "1.0", "0.5")
# NLTK's English stop words (those \w+ can produce): dropped from queries, where they only
# add common matches. Measured on LoCoMo: recall@10 +0.015 (docs/EVALUATION.md).
_STOP_TEXT = (
    "a about above after again against ain all am an and any are aren as at be because been "
    "before being below between both but by can couldn d did didn do does doesn doing don "
    "down during each few for from further had hadn has hasn have haven having he her here "
    "hers herself him himself his how i if in into is isn it its itself just ll m ma me "
    "mightn more most mustn my myself needn no nor not now o of off on once only or other our "
    "ours ourselves out over own re s same shan she should shouldn so some such t than that "
    "the their theirs them themselves then there these they this those through to too under "
    "until up ve very was wasn we were weren what when where which while who whom why will "
    "with won wouldn y you your yours yourself yourselves"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())

# Bigrams of Chinese question and function words ("你还记得我叫什么名字吗" gives 你还, 还记, 记得,
# 叫什, 什么, 么名...): in a question they match most messages and rank nothing, as English
# stop words do. Dropped from queries only. On our Chinese set, context evidence recall at
# a 2,048 window: 0.833 -> 0.868 (docs/EVALUATION.md).
_CJK_STOP_TEXT = (
    "什么 怎么 为什 哪里 哪儿 哪个 哪些 记得 还记 你还 知道 告诉 是不 不是 有没 没有 一下 一个 "
    "这个 那个 我们 你们 他们 我的 你的 时候 的时 是什 么时 么地 么名 叫什 了什 做了 去了 在哪 "
    "是谁 了吗 过吗"
)
CJK_STOP_BIGRAMS = frozenset(_CJK_STOP_TEXT.split())

FILTER_OPERATORS = frozenset({"=", "!=", "<", "<=", ">", ">="})


class Hit(NamedTuple):
    """A row and how well it matches: higher is better, for vectors and text alike."""

    id: int
    score: float


class Filter(NamedTuple):
    column: str
    op: str
    value: str | int | float


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


# --- vectors -------------------------------------------------------------------------------


def vector_table_sql(table: VectorTable, dimension: int) -> str:
    # vec0's constructor does not parse quoted identifiers; these names are constants above.
    metadata = "".join(f", {column} {kind}" for column, kind in table.metadata.items())
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table.name} USING vec0("
        f"{table.key} INTEGER PRIMARY KEY, agent_id TEXT PARTITION KEY{metadata}, "
        f"embedding FLOAT[{int(dimension)}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
    )


def create_vector_tables(*, dimension: int, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(vector_table_sql(table, dimension))


def drop_vector_tables(*, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {_q(table.name)}")


def vectors_exist(*, using: str = "default") -> bool:
    """Whether any vector table holds a vector."""
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(f"SELECT 1 FROM {_q(table.name)} LIMIT 1")
            if cursor.fetchone():
                return True
    return False


def vector_index_status(*, using: str = "default") -> VectorExtension:
    """Whether KNN can run: sqlite-vec loaded and every vector table present."""
    connection = connections[using]
    support = connection.vector_extension
    if not support.enabled:
        return support
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        present = {name for (name,) in cursor.fetchall()}
    missing = [table.name for table in VECTOR_TABLES if table.name not in present]
    if missing:
        return VectorExtension(
            False,
            f"the vector tables {', '.join(missing)} are missing: the database was migrated "
            "while sqlite-vec could not be loaded",
            support.version,
        )
    return support


def _as_float32(embedding: Sequence[float]) -> bytes:
    if not all(math.isfinite(x) for x in embedding):
        raise ValueError("embedding contains NaN or infinite values")
    return array("f", embedding).tobytes()


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
    if set(metadata) != set(table.metadata):
        raise ValueError(
            f"{table.name} needs metadata {sorted(table.metadata)}, got {sorted(metadata)}"
        )
    columns = [table.key, "agent_id", *metadata, "embedding"]
    values = [row_id, agent_id, *metadata.values(), _as_float32(embedding)]
    with connections[using].cursor() as cursor:
        # vec0 has no upsert, and a partition key cannot be updated: delete, then insert.
        cursor.execute(f"DELETE FROM {_q(table.name)} WHERE {_q(table.key)} = %s", [row_id])
        cursor.execute(
            f"INSERT INTO {_q(table.name)} ({', '.join(map(_q, columns))}) "
            f"VALUES ({', '.join(['%s'] * len(values))})",
            values,
        )


def vector_delete(table: VectorTable, row_ids: Iterable[int], *, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        cursor.executemany(
            f"DELETE FROM {_q(table.name)} WHERE {_q(table.key)} = %s", [[i] for i in row_ids]
        )


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
    conditions = ["embedding MATCH %s", "k = %s", "agent_id = %s"]
    params: list[Any] = [_as_float32(embedding), k, agent_id]
    for column, op, value in filters:
        if column not in table.metadata or op not in FILTER_OPERATORS:
            raise ValueError(f"cannot filter {table.name} on {column} {op}")
        conditions.append(f"{_q(column)} {op} %s")
        params.append(value)
    sql = (
        f"SELECT {_q(table.key)}, distance FROM {_q(table.name)} "
        f"WHERE {' AND '.join(conditions)} ORDER BY distance"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return [Hit(row_id, 1 - distance) for row_id, distance in cursor.fetchall()]


# --- text ----------------------------------------------------------------------------------


def register_sql_functions(*, connection: Any, **_: Any) -> None:
    """`connection_created` receiver: the text analysis the FTS5 triggers call, as SQL functions."""
    if connection.vendor != "sqlite":
        return
    for name, arity, function in (
        ("orca_fts_words", 1, text.without_cjk),
        ("orca_cjk_terms", 1, text.cjk_terms),
        ("orca_fts_terms", 1, text.fts_terms),
        ("orca_message_label", 3, text.message_label),
    ):
        connection.connection.create_function(name, arity, function, deterministic=True)


def scope_token(value: str) -> str:
    """One unicode61 token per scope value, distinct for distinct values ("a-b" vs "a b").

    The triggers compute the same token in SQL: 's' || lower(hex(value)).
    """
    return "s" + value.encode().hex()


def lexical_table_sql(table: LexicalTable) -> list[tuple[str, str]]:
    """(forward, reverse) statements: the FTS5 table, then its triggers.

    The migrations hold this text frozen: a change here needs a migration that creates the new
    text (tests/test_migrations.py compares the migrated schema with this).
    """
    columns = [*TEXT_COLUMNS, *table.scopes]
    create = (
        f"CREATE VIRTUAL TABLE {_q(table.name)} USING fts5({', '.join(columns)}, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    return [(create, f"DROP TABLE {_q(table.name)}"), *lexical_trigger_sql(table)]


def lexical_trigger_sql(table: LexicalTable) -> list[tuple[str, str]]:
    """(forward, reverse) statements of the triggers that keep the FTS5 table in sync.

    Django's SQLite schema editor rebuilds a table for most field changes, which drops its
    triggers: a migration that alters a source table must create them again (see 0005).
    `ctx` is computed when a row is inserted or updated; when a message's text or speaker is
    edited or the message deleted, `reindex_messages` refreshes the rows it appears in.
    """
    columns = [*TEXT_COLUMNS, *table.scopes]
    name, source = _q(table.name), _q(table.source)

    def row(r: str) -> str:
        body = table.body.format(r=r)
        scopes = "".join(f", 's' || lower(hex({r}.{_q(s)}))" for s in table.scopes)
        return (
            f"{r}.id, orca_fts_words({body}), orca_cjk_terms({r}.content), "
            f"{table.context.format(r=r)}{scopes}"
        )

    insert = f"INSERT INTO {name} (rowid, {', '.join(columns)}) VALUES ({row('new')});"
    delete = f"DELETE FROM {name} WHERE rowid = old.id;"
    watched = ", ".join(_q(c) for c in ("content", *table.scopes))
    trigger = (
        _q(table.name + "_sync_insert"),
        _q(table.name + "_sync_delete"),
        _q(table.name + "_sync_update"),
    )
    return [
        (
            f"CREATE TRIGGER {trigger[0]} AFTER INSERT ON {source} BEGIN {insert} END",
            f"DROP TRIGGER {trigger[0]}",
        ),
        (
            f"CREATE TRIGGER {trigger[1]} AFTER DELETE ON {source} BEGIN {delete} END",
            f"DROP TRIGGER {trigger[1]}",
        ),
        (
            f"CREATE TRIGGER {trigger[2]} AFTER UPDATE OF {watched} ON {source} "
            f"BEGIN {delete} {insert} END",
            f"DROP TRIGGER {trigger[2]}",
        ),
    ]


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


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _without(text: str, mentions: Sequence[dates.DayMention]) -> str:
    """The text with each mention replaced by a space."""
    for mention in reversed(mentions):
        text = f"{text[: mention.start]} {text[mention.end :]}"
    return text


def match_expression(query: str, *, now: datetime | None = None) -> str | None:
    """An FTS5 expression OR-ing the query's words and CJK terms; None if it has none.

    Words match the text and its context (`{body ctx}`), CJK bigrams the CJK terms of both;
    English stop words and Chinese function bigrams are dropped unless the query has nothing
    else. Every term is a quoted
    string, so no user text is read as FTS5 syntax.

    With `now`, each day the query names ("5月2号", "上周三", "May 2nd": memory.dates, relative
    days counted from `now`) is a phrase on `body`, where a message's label writes its date
    ("2 May 2023"), in place of the words that named it: "5", "2" or "may" alone would match
    any day. It weighs as one term: repeated to weigh more, it lost recall on LoCoMo questions
    asked with their day (docs/EVALUATION.md).
    """
    mentions = dates.find_day_mentions(query, now=now) if now is not None else []
    days = [f"body:{_phrase(day.phrase)}" for day in dict.fromkeys(m.day for m in mentions)]
    rest = _without(query, mentions)
    words = re.findall(r"\w+", without_cjk(rest).lower())
    # A query of stop words and a day ("what did I do on May 2") is about the day.
    words = [w for w in words if w not in STOP_WORDS] or ([] if days else words)
    terms = [*days, *(f"{{body ctx}}:{_phrase(w)}" for w in words)]
    bigrams = cjk_terms(rest, unigrams=False).split()
    bigrams = [t for t in bigrams if t not in CJK_STOP_BIGRAMS] or bigrams
    terms += [f"{{cjk ctx}}:{_phrase(t)}" for t in bigrams]
    unique = list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
    return " OR ".join(unique) if unique else None


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
    """The k best BM25 matches of one agent (optionally one session); higher score is better.

    `filters` apply to the source table's `filterable` columns, through a join; `exclude`
    names rows that must not take any of the k places.
    dated=True,
    """
    if session_id is not None and "session_id" not in table.scopes:
        raise ValueError(f"{table.name} has no session scope")
    if now is not None and not table.dated:
        raise ValueError(f"{table.name} has no dates to match")
    expression = match_expression(query, now=now)
    if expression is None:
        return []
    scope = {"agent_id": agent_id, "session_id": session_id}
    for column in table.scopes:
        if scope[column] is not None:
            expression = f"({expression}) AND {column}:{_phrase(scope_token(scope[column]))}"
    name = _q(table.name)
    join, conditions, params = "", [f"{name} MATCH %s"], [expression]
    if filters:
        join = f"JOIN {_q(table.source)} AS source ON source.id = {name}.rowid"
        for column, op, value in filters:
            if column not in table.filterable or op not in FILTER_OPERATORS:
                raise ValueError(f"cannot filter {table.name} on {column} {op}")
            conditions.append(f"source.{_q(column)} {op} %s")
            params.append(value)
    if exclude:
        conditions.append(f"{name}.rowid NOT IN ({', '.join(['%s'] * len(exclude))})")
        params.extend(exclude)
    # Context counts half; scope columns weigh nothing, they only restrict the match.
    weights = ", ".join([*TEXT_WEIGHTS, *["0.0"] * len(table.scopes)])
    sql = (
        f"SELECT {name}.rowid, bm25({name}, {weights}) AS score FROM {name} {join} "
        f"WHERE {' AND '.join(conditions)} ORDER BY score LIMIT %s"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [*params, k])
        return [Hit(row_id, -score) for row_id, score in cursor.fetchall()]
