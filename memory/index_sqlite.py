"""The SQLite engine of the indexes: sqlite-vec's vec0 for vectors, FTS5 for text.

Vectors: one vec0 table per searchable table, partitioned by `agent_id`, since every query is
scoped to one agent and KNN inside a partition scans only that agent's vectors
(docs/BENCHMARKS.md). The narrower filters are vec0 metadata columns, applied during the scan.

Text: one FTS5 table per searchable table (porter-stemmed unicode61), filled by triggers from the
base table. It holds the words of the text (`body`), its CJK unigrams and bigrams (`cjk`, see
memory.text), for messages the two messages before it (`ctx`), and the scope as one exact token
per column (`agent_id`, `session_id`: "s" + hex of the value), so that scoping is a term of the
MATCH itself rather than a join. Recall's message query of a large agent is answered by the
derived text index (index_text) where it can, with FTS5's rows and scores.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections

from memory import index_numpy, index_text, text
from memory.index_schema import (
    CONTEXT_MESSAGES,
    MESSAGE_TEXT,
    VECTOR_TABLES,
    Filter,
    Hit,
    KnnPath,
    LexicalTable,
    Term,
    VectorIndexStatus,
    VectorRow,
    VectorTable,
    query_terms,
)

# vec0 scans a chunk at a time and reserves whole chunks per partition (default 1024 rows):
# 128 keeps a small agent's footprint small and made in-partition KNN fastest when measured.
CHUNK_SIZE = 128

TEXT_COLUMNS = ("body", "cjk", "ctx")
TEXT_WEIGHTS = ("1.0", "1.0", "0.5")

# What each FTS5 table's `body` and `ctx` hold, as SQL over the trigger's row `{r}`; `cjk` is
# always the CJK terms of the row's content.
_PREVIOUS_MESSAGES = (
    "(SELECT group_concat(orca_message_label(NULL, p.role, p.metadata) || p.content, char(10)) "
    "FROM (SELECT role, metadata, content FROM main_messages AS p "
    "WHERE p.agent_id = {r}.agent_id AND p.session_id = {r}.session_id "
    "AND (p.timestamp, p.id) < ({r}.timestamp, {r}.id) "
    f"ORDER BY p.timestamp DESC, p.id DESC LIMIT {CONTEXT_MESSAGES}) AS p)"
)
_BODY = {
    MESSAGE_TEXT.name: "orca_message_label({r}.timestamp, {r}.role, {r}.metadata) || {r}.content"
}
_CONTEXT = {MESSAGE_TEXT.name: f"orca_fts_terms({_PREVIOUS_MESSAGES})"}


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def database_report(*, using: str = "default") -> dict[str, object]:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT sqlite_version()")
        (version,) = cursor.fetchone()
        cursor.execute("PRAGMA journal_mode")
        (journal_mode,) = cursor.fetchone()
    return {
        "engine": "sqlite",
        "sqlite_version": version,
        "journal_mode": journal_mode,
        "text_index": asdict(index_text.report()),
    }


def memory_index_report() -> dict[str, object]:
    return {"memory_index": asdict(index_numpy.report())}


def knn_path(*, using: str = "default") -> KnnPath:
    """The derived index (index_numpy) where it can read vec0's storage, else vec0's scan."""
    return index_numpy.knn_path(using)


def drop_saved_graphs(*, agent_id: str, using: str = "default") -> None:
    index_numpy.drop_saved_graphs(str(connections[using].settings_dict["NAME"]), agent_id)


# --- vectors -------------------------------------------------------------------------------


def vector_table_sql(table: VectorTable, dimension: int) -> str:
    # vec0's constructor does not parse quoted identifiers; these names are constants above.
    metadata = "".join(f", {column} {kind}" for column, kind in table.metadata.items())
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table.name} USING vec0("
        f"{table.key} INTEGER PRIMARY KEY, agent_id TEXT PARTITION KEY{metadata}, "
        f"embedding FLOAT[{int(dimension)}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
    )


def create_vector_tables(
    *, dimension: int, search_index: bool = True, using: str = "default"
) -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(vector_table_sql(table, dimension))


def drop_vector_tables(*, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {_q(table.name)}")
        # Every process's derived index of these tables is out of date: one reset marker each.
        cursor.execute(f"DELETE FROM {index_numpy.CHANGES}")
        cursor.executemany(
            f"INSERT INTO {index_numpy.CHANGES} (table_name, agent_id, row_id) "
            "VALUES (%s, '', NULL)",
            [[table.name] for table in VECTOR_TABLES],
        )


def maintain_agent_indexes(*, using: str) -> list[str]:
    return []  # vec0 and the derived index have no per-agent index to keep


def vectors_exist(*, using: str = "default") -> bool:
    """Whether any vector table holds a vector."""
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            cursor.execute(f"SELECT 1 FROM {_q(table.name)} LIMIT 1")
            if cursor.fetchone():
                return True
    return False


def vector_index_status(*, using: str = "default") -> VectorIndexStatus:
    """Whether KNN can run: sqlite-vec loaded and every vector table present."""
    connection = connections[using]
    extension = connection.vector_extension
    if not extension.enabled:
        return VectorIndexStatus(False, extension.reason)
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        present = {name for (name,) in cursor.fetchall()}
    missing = [table.name for table in VECTOR_TABLES if table.name not in present]
    if missing:
        return VectorIndexStatus(
            False,
            f"the vector tables {', '.join(missing)} are missing: the database was migrated "
            "while sqlite-vec could not be loaded",
            extension.version,
        )
    return VectorIndexStatus(True, None, extension.version)


def _as_float32(embedding: Sequence[float]) -> bytes:
    return array("f", embedding).tobytes()


def vectors_put(table: VectorTable, rows: Sequence[VectorRow], *, using: str = "default") -> None:
    """Insert or replace the vectors of these rows. Joins the caller's transaction."""
    columns = [table.key, "agent_id", *table.metadata, "embedding"]
    values = [
        [row.row_id, row.agent_id, *(row.metadata[c] for c in table.metadata)]
        + [_as_float32(row.embedding)]
        for row in rows
    ]
    with connections[using].cursor() as cursor:
        # vec0 has no upsert, and a partition key cannot be updated: delete, then insert.
        cursor.executemany(
            f"DELETE FROM {_q(table.name)} WHERE {_q(table.key)} = %s", [[r.row_id] for r in rows]
        )
        cursor.executemany(
            f"INSERT INTO {_q(table.name)} ({', '.join(map(_q, columns))}) "
            f"VALUES ({', '.join(['%s'] * len(columns))})",
            values,
        )
        _log_changes(cursor, table, [(row.agent_id, row.row_id) for row in rows])


def _log_changes(cursor: Any, table: VectorTable, changes: list[tuple[str, int]]) -> None:
    """Tell every process's derived index (index_numpy) which rows changed, in the writer's
    transaction; keep the newest RETAIN_CHANGES entries."""
    cursor.executemany(
        f"INSERT INTO {index_numpy.CHANGES} (table_name, agent_id, row_id) VALUES (%s, %s, %s)",
        [[table.name, agent_id, row_id] for agent_id, row_id in changes],
    )
    cursor.execute(
        f"DELETE FROM {index_numpy.CHANGES} "
        f"WHERE id <= (SELECT max(id) FROM {index_numpy.CHANGES}) - %s",
        [index_numpy.RETAIN_CHANGES],
    )


# How vector_rows reads an embedding: vec0 returns the float32 blob it stores.
EMBEDDING_READ = "embedding"

# The derived indexes answer in this process, FTS5 and vec0 in this thread's connection: a query
# started from another thread would contend for the GIL (index.started).
ANSWERS_APART = False


def embedding_from_db(value: bytes) -> list[float]:
    return array("f", value).tolist()


def vector_delete(table: VectorTable, row_ids: Iterable[int], *, using: str = "default") -> None:
    ids = list(row_ids)
    with connections[using].cursor() as cursor:
        # The log is per agent: read each row's partition before it goes.
        owners: list[tuple[str, int]] = []
        for row_id in ids:
            cursor.execute(
                f"SELECT agent_id FROM {_q(table.name)} WHERE {_q(table.key)} = %s", [row_id]
            )
            owners.extend((agent_id, row_id) for (agent_id,) in cursor.fetchall())
        cursor.executemany(
            f"DELETE FROM {_q(table.name)} WHERE {_q(table.key)} = %s", [[i] for i in ids]
        )
        _log_changes(cursor, table, owners)


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
    (higher is closer, as with lexical_search). Answered by the derived index where it can
    (index_numpy: committed data, within its memory bound), else by vec0's scan."""
    if index_numpy.enabled(using):
        hits = index_numpy.knn(
            table, agent_id=agent_id, embedding=embedding, k=k, filters=filters, using=using
        )
        if hits is not None:
            return hits
    conditions = ["embedding MATCH %s", "k = %s", "agent_id = %s"]
    params: list[Any] = [_as_float32(embedding), k, agent_id]
    for column, op, value in filters:
        conditions.append(f"{_q(column)} {op} %s")
        params.append(value)
    sql = (
        f"SELECT {_q(table.key)}, distance FROM {_q(table.name)} "
        f"WHERE {' AND '.join(conditions)} ORDER BY distance"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return [Hit(row_id, 1 - distance) for row_id, distance in cursor.fetchall()]


# Point lookups joined into one statement by `similarities` (SQLite allows 500 SELECTs in
# one compound statement).
SIMILARITY_LOOKUPS = 100


def similarities(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    row_ids: Collection[int],
    using: str = "default",
) -> list[Hit]:
    """The cosine similarity of the embedding to each of these rows' vectors. Answered by the
    derived index where it can, as `knn` is (a context's ~100 lookups in vec0 took 3-5 ms:
    each reads its row's chunk); else one point lookup a row (vec0 answers `key IN (...)` by
    scanning the whole table), up to SIMILARITY_LOOKUPS of them in one statement: a
    statement each cost 5x more."""
    if index_numpy.enabled(using):
        hits = index_numpy.similarities(
            table, agent_id=agent_id, embedding=embedding, row_ids=row_ids, using=using
        )
        if hits is not None:
            return hits
    lookup = (
        f"SELECT {_q(table.key)}, vec_distance_cosine(embedding, %s) FROM {_q(table.name)} "
        f"WHERE {_q(table.key)} = %s AND agent_id = %s"
    )
    query = _as_float32(embedding)
    ids = list(row_ids)
    hits: list[Hit] = []
    with connections[using].cursor() as cursor:
        for start in range(0, len(ids), SIMILARITY_LOOKUPS):
            chunk = ids[start : start + SIMILARITY_LOOKUPS]
            params = [value for row_id in chunk for value in (query, row_id, agent_id)]
            cursor.execute(" UNION ALL ".join([lookup] * len(chunk)), params)
            hits.extend(Hit(key, 1 - distance) for key, distance in cursor.fetchall())
    return hits


# --- text ---------------------------------------------------------------------------------


def prepare_connection(*, connection: Any, **_: Any) -> None:
    """`connection_created` receiver: the text analysis the FTS5 triggers call, as SQL functions."""
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
        body = _BODY.get(table.name, "{r}.content").format(r=r)
        scopes = "".join(f", 's' || lower(hex({r}.{_q(s)}))" for s in table.scopes)
        return (
            f"{r}.id, orca_fts_words({body}), orca_cjk_terms({r}.content), "
            f"{_CONTEXT.get(table.name, "''").format(r=r)}{scopes}"
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


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


# The FTS5 columns each kind of term matches: a day the date label at the start of `body`.
_COLUMNS = {"day": "body", "word": "{body ctx}", "bigram": "{cjk ctx}"}


def _term_expression(term: Term) -> str:
    return f"{_COLUMNS[term.kind]}:{_phrase(term.text)}"


def match_expression(terms: Sequence[Term]) -> str | None:
    """An FTS5 expression OR-ing a query's terms (index_schema.query_terms); None if it has
    none. Every term is a quoted string, so no user text is read as FTS5 syntax."""
    return " OR ".join(_term_expression(term) for term in terms) if terms else None


# --- terms that weigh nothing ----------------------------------------------------------------

# FTS5's bm25 gives a term in half of the table's rows or more an idf of 1e-6 (its
# log((N - n + 0.5) / (n + 0.5)) is 0 or less, and clamped): the term changes no ranking, yet
# every row holding it is read and scored. In the context benchmark's store, the query words
# of that kind made the recall query several times slower, for the same top 50
# (docs/BENCHMARKS.md, "Words that weigh nothing, left out"). Only from PRUNE_FROM_ROWS
# rows: the rows that hold nothing but such a term rank last, but in a small table (a new
# agent's few messages) they are much of what a query finds, and scoring them costs little.
# The counts are taken per process, with FTS5's own MATCH, and kept while the table has grown
# by less than RECOUNT_GROWTH of its rows (a term's share moves by at most as much) and for at
# most RECOUNT_SECONDS (deleted rows do not show in the growth).
PRUNE_FROM_ROWS = 10_000
RECOUNT_GROWTH = 0.02
RECOUNT_SECONDS = 600.0
MAX_COUNTED_TERMS = 50_000


@dataclass
class _TermCounts:
    rows: int  # the table's rows when counted
    top_rowid: int  # its largest rowid then: the growth since is read from it
    counted_at: float  # time.monotonic()
    docs: dict[Term, int] = field(default_factory=dict)  # rows holding each term

    def current(self, top_rowid: int) -> bool:
        grown = top_rowid - self.top_rowid
        return (
            0 <= grown < max(1.0, self.rows * RECOUNT_GROWTH)
            and time.monotonic() - self.counted_at < RECOUNT_SECONDS
            and len(self.docs) < MAX_COUNTED_TERMS
        )


_TERM_COUNTS: dict[tuple[str, str], _TermCounts] = {}


def forget_term_counts() -> None:
    """Forget every count (tests that empty a table and fill it again with other words)."""
    _TERM_COUNTS.clear()


def weighing_terms(table: LexicalTable, terms: list[Term], *, using: str) -> list[Term]:
    """The terms bm25 gives a weight: those in fewer than half of the table's rows, once it
    has PRUNE_FROM_ROWS. All of them when none is: a query of frequent words still finds the
    rows that hold them."""
    return _weighing(terms, _counted(table, terms, using))


def _counted(table: LexicalTable, terms: list[Term], using: str) -> _TermCounts | None:
    """The table's counts, holding every one of these terms; None below PRUNE_FROM_ROWS."""
    counts = _term_counts(table, using) if terms else None
    if counts is None or counts.rows < PRUNE_FROM_ROWS:
        return None
    for term in terms:
        if term not in counts.docs:
            counts.docs[term] = _count(table, term, using)
    return counts


def _count(table: LexicalTable, term: Term, using: str) -> int:
    """The table's rows holding the term (every agent's: bm25's idf is the table's)."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {_q(table.name)} WHERE {_q(table.name)} MATCH %s",
            [_term_expression(term)],
        )
        (found,) = cursor.fetchone()
    return found


def _weighing(terms: list[Term], counts: _TermCounts | None) -> list[Term]:
    if counts is None:
        return terms
    return _weighing_held(terms, counts.docs, counts.rows)


def _weighing_held(terms: list[Term], held: dict[Term, int], rows: int) -> list[Term]:
    """The terms in fewer than half of the table's `rows` (`held`: the rows holding each),
    from PRUNE_FROM_ROWS rows; all of them when none is."""
    if rows < PRUNE_FROM_ROWS:
        return terms
    return [term for term in terms if 2 * held[term] < rows] or terms


# --- rows that hold only the frequent terms ---------------------------------------------------

# A word in a tenth of the rows still weighs (idf about 2), so it stays in the query, and bm25
# scores every row holding it: an agent of 100,000 messages had queries scoring 20,000-45,000
# rows, 20-60 ms (docs/BENCHMARKS.md, "One agent holding the store"). A row that holds none of
# the query's rarer terms ranks below most rows that hold one, so once the rarer terms are in
# GATE_ROWS rows of the table, only rows holding one of them are scored: the expression ANDs
# them with the frequent terms OR the agent's scope token (which every row of the agent holds,
# and which weighs 0). FTS5 then reads the frequent terms' lists only at those rows, and scores
# each row with every term, as before: the same score for every row it returns.
GATE_ROWS = 2_500


def _split_by_rarity(terms: list[Term], counts: _TermCounts) -> tuple[list[Term], list[Term]]:
    """(the rarest terms, fewest rows first, until they hold GATE_ROWS rows; the others)."""
    rare: list[Term] = []
    held = 0
    for term in sorted(terms, key=lambda t: counts.docs[t]):
        if held >= GATE_ROWS:
            break
        rare.append(term)
        held += counts.docs[term]
    return rare, [term for term in terms if term not in rare]


def gated_expression(terms: list[Term], counts: _TermCounts | None, agent_id: str) -> str | None:
    """match_expression of the terms, limited to rows holding one of the rarer terms when
    these are in GATE_ROWS rows or more (and the table has PRUNE_FROM_ROWS: `counts`)."""
    if counts is None:
        return match_expression(terms)
    rare, frequent = _split_by_rarity(terms, counts)
    if not frequent:
        return match_expression(terms)
    every_row = f"agent_id:{_phrase(scope_token(agent_id))}"
    return f"({match_expression(rare)}) AND ({match_expression(frequent)} OR {every_row})"


def _term_counts(table: LexicalTable, using: str) -> _TermCounts | None:
    """The process's counts for the table, taken anew when stale (inside a transaction always
    anew and not kept, since what it writes may be rolled back); None for a table whose ids
    stay under PRUNE_FROM_ROWS, which has fewer rows than that."""
    key = (str(connections[using].settings_dict["NAME"]), table.name)
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(rowid), 0) FROM {_q(table.name)}")
        (top_rowid,) = cursor.fetchone()
        if top_rowid < PRUNE_FROM_ROWS:
            return None
        kept = not connections[using].in_atomic_block
        counts = _TERM_COUNTS.get(key) if kept else None
        if counts is not None and counts.current(top_rowid):
            return counts
        # The source holds one row per FTS5 row, and counts far faster than FTS5 itself.
        cursor.execute(f"SELECT count(*) FROM {_q(table.source)}")
        (rows,) = cursor.fetchone()
    counts = _TermCounts(rows, top_rowid, time.monotonic())
    if kept:
        _TERM_COUNTS[key] = counts
    return counts


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
    names rows that must not take any of the k places. Recall's message query of an agent
    of index_text.MIN_ROWS messages or more is answered by index_text where it can: the
    rows and scores of the whole FTS5 query below, ungated.
    """
    terms = query_terms(query, now=now)
    if index_text.answers(table.name, session_id=session_id, filters=filters, using=using):
        hits = index_text.lexical_search(
            agent_id=agent_id,
            token=scope_token(agent_id),
            terms=terms,
            exclude=exclude,
            k=k,
            weighing=_weighing_held,
            count=lambda term: _count(table, term, using),
            using=using,
        )
        if hits is not None:
            return hits
    counts = _counted(table, terms, using)
    expression = gated_expression(_weighing(terms, counts), counts, agent_id)
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
