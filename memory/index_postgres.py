"""The PostgreSQL engine of the indexes: pgvector for vectors, full text search for text.

Vectors: one table per searchable table (`vector(dim)`, the same metadata columns as vec0),
with an HNSW index (cosine) and a B-tree on `agent_id`. A KNN is one agent's: pgvector 0.8's
iterative index scan (`hnsw.iterative_scan`, set on every connection) keeps walking the graph
until k rows of that agent pass the filter, and for a small agent the planner prefers the
B-tree and sorts exactly (docs/BENCHMARKS.md, "KNN with HNSW, and agent scoping").

Text: one table per searchable table, filled by triggers (migration 0013), holding one
`tsvector` per row whose weights say where a lexeme came from, as FTS5's columns do:
A the words of the text (English stemming that keeps stop words, as FTS5's porter does;
after the date label for messages), C its CJK
unigrams and bigrams (memory.text's scheme, computed in SQL by `orca_cjk_terms`), B and D the
words and CJK terms of the two messages before it. A word matches A and B, a CJK bigram C and
D, with the weights of the SQLite engine (context counts half). The score is BM25 as FTS5
computes it, from each term's occurrences in a row (unnested from its tsvector), the row's
number of distinct lexemes as its length, and the term's document frequency in the scope.
`ts_rank` times an inverse document frequency (no saturation, no length normalisation) fell
further below FTS5's LoCoMo recall than this does (docs/EVALUATION.md, "PostgreSQL against
SQLite").
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import math
import threading
import time
from array import array
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections

from memory.index_schema import (
    MESSAGE_VECTORS,
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

logger = logging.getLogger(__name__)

# How far the HNSW search looks (`hnsw.ef_search`, the candidates a graph search keeps): at
# least EF_SEARCH, and at least the k asked. With fewer than k, pgvector's iterative scan
# searches the graph again for the rest: the context's message KNN (k = 101 and the session's
# newest messages, about 157) read 5,000 buffers at 100 for 157, and an ef_search of k found
# more of the true neighbours in less time (docs/BENCHMARKS.md, PostgreSQL's "Context
# assembly"). pgvector takes at most EF_SEARCH_MAX.
EF_SEARCH = 100
EF_SEARCH_MAX = 1000


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def prepare_connection(*, connection: Any, **_: Any) -> None:
    """`connection_created` receiver: iterative HNSW scans, so a filtered KNN fills its k
    (`knn` sets hnsw.ef_search for each query)."""
    with connection.connection.cursor() as cursor:
        cursor.execute("SET hnsw.iterative_scan = relaxed_order")


def database_report(*, using: str = "default") -> dict[str, object]:
    with connections[using].cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    return {"engine": "postgresql", "postgres_version": version}


def memory_index_report() -> dict[str, object]:
    return {}  # HNSW lives in the server: nothing held in this process


def drop_saved_graphs(*, agent_id: str, using: str = "default") -> None:
    return None  # every index is in the server: no copy outside the database


def knn_path(*, using: str = "default") -> KnnPath:
    return KnnPath(
        "pgvector",
        "PostgreSQL's pgvector: its HNSW index, or an exact sort of a small agent's rows where "
        "the planner prefers its B-tree on agent_id",
    )


# --- vectors -------------------------------------------------------------------------------


def vector_table_sql(table: VectorTable, dimension: int, *, search_index: bool = True) -> list[str]:
    columns = "".join(
        f", {_q(column)} {'bigint' if kind == 'integer' else 'text'}"
        for column, kind in table.metadata.items()
    )
    name = _q(table.name)
    statements = [
        f"CREATE TABLE IF NOT EXISTS {name} ({_q(table.key)} bigint PRIMARY KEY, "
        f"agent_id text NOT NULL{columns}, embedding vector({int(dimension)}) NOT NULL)",
        # pgvector's EXTERNAL storage puts vectors of more than ~500 dimensions in the TOAST
        # table: an exact scan then reads each through the TOAST index, and the planner,
        # seeing a heap of a few MB, prefers it to the HNSW index (docs/BENCHMARKS.md, "KNN
        # with HNSW, and agent scoping"). MAIN keeps a vector in its row while the row fits a
        # page.
        f"ALTER TABLE {name} ALTER COLUMN embedding SET STORAGE MAIN",
        f"CREATE INDEX IF NOT EXISTS {_q(table.name + '_agent')} ON {name} (agent_id)",
    ]
    if search_index:
        statements.append(
            f"CREATE INDEX IF NOT EXISTS {_q(table.name + '_hnsw')} ON {name} "
            "USING hnsw (embedding vector_cosine_ops)"
        )
    return statements


def create_vector_tables(
    *, dimension: int, search_index: bool = True, using: str = "default"
) -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            for statement in vector_table_sql(table, dimension, search_index=search_index):
                cursor.execute(statement)


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


def vector_index_status(*, using: str = "default") -> VectorIndexStatus:
    """Whether KNN can run: pgvector installed in the database and every vector table present."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        if row is None:
            return VectorIndexStatus(
                False,
                "the pgvector extension is not installed in this database: a superuser runs "
                "CREATE EXTENSION vector, then `manage.py migrate` (docs/DEPLOYMENT.md)",
            )
        cursor.execute(
            "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(quote_ident(name)) "
            "IS NULL",
            [[table.name for table in VECTOR_TABLES]],
        )
        missing = [name for (name,) in cursor.fetchall()]
    if missing:
        return VectorIndexStatus(
            False, f"the vector tables {', '.join(missing)} are missing: run `manage.py migrate`"
        )
    return VectorIndexStatus(True, None, row[0])


def _as_vector(embedding: Sequence[float]) -> str:
    """pgvector's text form: '[0.1,0.2,...]'."""
    # str() of a list of floats writes each by repr, in C: the copy's hot path.
    return str([float(x) for x in embedding]).replace(" ", "")


@functools.lru_cache(maxsize=4)
def _query_vector(embedding: tuple[float, ...]) -> str:
    """A query's vector as pgvector's text, written once: a context call sends the same one in
    four statements (the KNN over messages, summaries and memories, and the candidates'
    similarities), and writing it took 0.6 ms each time."""
    return _as_vector(embedding)


def vectors_put(table: VectorTable, rows: Sequence[VectorRow], *, using: str = "default") -> None:
    """Insert or replace the vectors of these rows. Joins the caller's transaction."""
    columns = [table.key, "agent_id", *table.metadata, "embedding"]
    values = [
        [row.row_id, row.agent_id, *(row.metadata[c] for c in table.metadata)]
        + [_as_vector(row.embedding)]
        for row in rows
    ]
    updates = ", ".join(f"{_q(c)} = EXCLUDED.{_q(c)}" for c in columns[1:])
    with connections[using].cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {_q(table.name)} ({', '.join(map(_q, columns))}) "
            f"VALUES ({', '.join(['%s'] * (len(columns) - 1))}, %s::vector) "
            f"ON CONFLICT ({_q(table.key)}) DO UPDATE SET {updates}",
            values,
        )


# How vector_rows reads an embedding: as pgvector's text, '[0.1,0.2,...]'.
EMBEDDING_READ = "embedding::text"

# pgvector and tsvector answer in PostgreSQL's own processes (index.started).
ANSWERS_APART = True


def embedding_from_db(value: str) -> list[float]:
    # pgvector stores float4 and writes each as the shortest text that reads back the same
    # float4: through array("f") the values are exactly the stored ones.
    return array("f", map(float, value[1:-1].split(","))).tolist()


def vector_delete(table: VectorTable, row_ids: Iterable[int], *, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {_q(table.name)} WHERE {_q(table.key)} = ANY(%s)", [list(row_ids)]
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
    """The k nearest vectors of one agent, nearest first; score is the cosine similarity."""
    conditions, params = ["agent_id = %s"], [agent_id]
    for column, op, value in filters:
        conditions.append(f"{_q(column)} {op} %s")
        params.append(value)
    # An iterative scan returns rows in roughly nearest-first order: the outer query sorts
    # them exactly (pgvector's documented pattern).
    # Set in the same round trip as the query: one SET per KNN, whatever ran before it.
    ef_search = min(max(EF_SEARCH, k), EF_SEARCH_MAX)
    sql = (
        f"SET hnsw.ef_search = {ef_search}; "
        f"WITH nearest AS MATERIALIZED (SELECT {_q(table.key)} AS id, "
        f"embedding <=> %s::vector AS distance FROM {_q(table.name)} "
        f"WHERE {' AND '.join(conditions)} ORDER BY distance LIMIT %s) "
        "SELECT id, distance FROM nearest ORDER BY distance, id"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [_query_vector(tuple(embedding)), *params, k])
        cursor.nextset()  # past the SET
        return [Hit(row_id, 1 - distance) for row_id, distance in cursor.fetchall()]


# --- an HNSW index of its own for a large agent -------------------------------------------

# The shared HNSW index holds every agent's message vectors: a KNN for one agent walks the
# graph past the others' (an iterative scan), and at 100k messages over 10 agents the
# context's k=157 read 21,700 buffers, 30-140 ms; for an agent holding a tenth of 1M vectors
# its recall@10 was 0.70 (docs/BENCHMARKS.md, PostgreSQL). An agent holding AGENT_INDEX_ROWS
# vectors or more in a vector table (messages, summaries or memories; and less than half of
# the table's: else the shared graph is mostly its own) gets an index of its own there,
# partial on its agent_id, which the planner prefers for that
# agent's queries (they name the agent); it is dropped once the agent holds fewer than half
# of AGENT_INDEX_ROWS. The service checks after embedding, at most every
# AGENT_INDEX_CHECK_SECONDS per process: an index built then, concurrently, takes seconds
# (about 7 s for 10,000 x 1,024 on 2 cores), and every later vector of the agent is added to
# both graphs.
AGENT_INDEX_ROWS = 10_000
AGENT_INDEX_CHECK_SECONDS = 600.0
_AGENT_INDEXES_CHECKED: dict[str, float] = {}  # database name -> time.monotonic()


def agent_index_name(agent_id: str, table: VectorTable = MESSAGE_VECTORS) -> str:
    """The name of an agent's own HNSW index on a vector table: its id hashed (identifiers
    are 63 bytes)."""
    return _agent_index_prefix(table) + hashlib.sha256(agent_id.encode()).hexdigest()[:16]


def _agent_index_prefix(table: VectorTable) -> str:
    return f"{table.name}_hnsw_"


def maintain_agent_indexes(*, using: str) -> list[str]:
    """Build the missing indexes of large agents and drop those of agents grown small, on
    each vector table; the names built or dropped. Not inside a transaction (CONCURRENTLY),
    and at most every AGENT_INDEX_CHECK_SECONDS per process and database."""
    connection = connections[using]
    database = str(connection.settings_dict["NAME"])
    checked = _AGENT_INDEXES_CHECKED.get(database)
    if connection.in_atomic_block or (
        checked is not None and time.monotonic() - checked < AGENT_INDEX_CHECK_SECONDS
    ):
        return []
    _AGENT_INDEXES_CHECKED[database] = time.monotonic()
    changed = []
    with connection.cursor() as cursor:
        for table in VECTOR_TABLES:
            changed += _maintain_agent_indexes(cursor, table)
    return changed


def _maintain_agent_indexes(cursor: Any, table: VectorTable) -> list[str]:
    name = _q(table.name)
    # Large: AGENT_INDEX_ROWS or more, and less than half of all (an agent holding most
    # vectors has the shared graph nearly to itself). Half of AGENT_INDEX_ROWS keeps one.
    cursor.execute(
        f"SELECT agent_id, count(*) >= %s AND 2 * count(*) < (SELECT count(*) FROM {name}) "
        f"FROM {name} GROUP BY agent_id HAVING count(*) >= %s",
        [AGENT_INDEX_ROWS, AGENT_INDEX_ROWS // 2],
    )
    sizes = dict(cursor.fetchall())  # agent -> large
    cursor.execute(
        "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_index AS i "
        "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass "
        "AND c.relname LIKE %s",
        [table.name, _agent_index_prefix(table).replace("_", "\\_") + "%"],
    )
    existing = dict(cursor.fetchall())  # index name -> its agent, in its comment
    changed = []
    for index_name, agent_id in existing.items():
        # An index without its comment is one whose build failed (left INVALID): it goes.
        if agent_id not in sizes and _ddl(cursor, f"DROP INDEX CONCURRENTLY {_q(index_name)}"):
            changed.append(index_name)
    indexed = set(existing.values())  # a hand-made index counts by its comment too
    for agent_id, large in sizes.items():
        index_name = agent_index_name(agent_id, table)
        if large and agent_id not in indexed:
            cursor.execute("SELECT quote_literal(%s)", [agent_id])
            (literal,) = cursor.fetchone()
            if _ddl(
                cursor,
                f"CREATE INDEX CONCURRENTLY {_q(index_name)} ON {name} "
                f"USING hnsw (embedding vector_cosine_ops) WHERE agent_id = {literal}",
                f"COMMENT ON INDEX {_q(index_name)} IS {literal}",
            ):
                changed.append(index_name)
    return changed


def _ddl(cursor: Any, *statements: str) -> bool:
    """Run them; on a database error (another process building the same index, a lock, a
    full disk) log it and go on: the index is an optimisation, the vectors are written."""
    try:
        for statement in statements:
            cursor.execute(statement)
    except DatabaseError as exc:
        logger.warning("Per-agent vector index not changed (%s): %s", statements[0], exc)
        return False
    return True


def forget_agent_index_checks() -> None:
    """Check again at the next call (tests)."""
    _AGENT_INDEXES_CHECKED.clear()


def similarities(
    table: VectorTable,
    *,
    agent_id: str,
    embedding: Sequence[float],
    row_ids: Collection[int],
    using: str = "default",
) -> list[Hit]:
    """The cosine similarity of the embedding to each of these rows' vectors."""
    sql = (
        f"SELECT {_q(table.key)}, 1 - (embedding <=> %s::vector) FROM {_q(table.name)} "
        f"WHERE agent_id = %s AND {_q(table.key)} = ANY(%s)"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [_query_vector(tuple(embedding)), agent_id, list(row_ids)])
        return [Hit(row_id, similarity) for row_id, similarity in cursor.fetchall()]


# --- text ----------------------------------------------------------------------------------

# Each term of the query: the lexemes that stand for it in a row's tsvector, with the weights
# they count at, and a tsquery that finds the rows holding it. A word is its English lexemes
# (as the trigger indexed the text: to_tsvector) on weight A, and B as context; a CJK bigram
# itself on C, and D as context; a day the phrase of its label's words ("2 May 2023"), which
# counts once where it matches.
_TERMS = """
WITH term AS (
    SELECT t.n, t.kind, w.lexemes, CASE t.kind
        WHEN 'day' THEN phraseto_tsquery('orca_english', t.text)
        ELSE (
            SELECT string_agg(quote_literal(lexeme) || w.weights, ' | ')
            FROM unnest(w.lexemes) AS lexeme
        )::tsquery
    END AS q
    FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(kind, text, n), LATERAL (
        SELECT CASE t.kind
            WHEN 'word' THEN tsvector_to_array(to_tsvector('orca_english', t.text))
            WHEN 'bigram' THEN ARRAY[t.text]
        END AS lexemes, CASE t.kind WHEN 'word' THEN ':AB' ELSE ':CD' END AS weights
    ) AS w
), usable AS (SELECT n, kind, lexemes, q FROM term WHERE q IS NOT NULL AND numnode(q) > 0),
term_lexeme AS (
    SELECT n, lexeme, CASE kind WHEN 'word' THEN 'A' ELSE 'C' END AS text_weight,
        CASE kind WHEN 'word' THEN 'B' ELSE 'D' END AS context_weight
    FROM usable, unnest(lexemes) AS lexeme
)
"""

# The tsquery of rows holding every term of one of the clauses, each clause its terms'
# numbers ("1,3"): NULL for none.
_CLAUSES = (
    "(SELECT string_agg('(' || (SELECT string_agg('(' || u.q::text || ')', ' & ') FROM usable "
    "AS u WHERE u.n = ANY(string_to_array(c, ',')::int[])) || ')', ' | ')::tsquery FROM "
    "unnest(%s::text[]) AS c)"
)

# How the rows of the fill are ranked before the best are scored: ts_rank with the weights
# of the text and its context (D, C, B, A: context bigrams, bigrams, context words, words).
_FILL_WEIGHTS = "{0.5,1,0.5,1}"

# BM25's parameters, FTS5's.
BM25_K1 = 1.2
BM25_B = 0.75

# --- the terms that weigh, and the rows worth scoring -----------------------------------------

# Scoring a matched row (its tsvector cut to the query's lexemes and unnested) costs 13-16 us:
# at 100k messages over 10 agents a query with a word in most of an agent's rows scored all of
# its 10,000 rows, 250-450 ms (docs/BENCHMARKS.md, PostgreSQL's "Context assembly"). As on
# SQLite (index_sqlite, "terms that weigh nothing" and "rows that hold only the frequent
# terms"), once the scope holds PRUNE_FROM_ROWS rows: a term in half of its rows or more is
# left out (its idf is floored at 1e-6: it ranks nothing), and only the rows of a gate are
# scored (with every term: the same score for each row returned, but for the mean length,
# taken over the rows scored), at most about SCORED_ROWS of them however large the agent. The
# gate: each combination of the GATE_TERMS rarer terms that a row may hold, heaviest first
# (their idf summed: roughly how a row holding just them scores), with the rows expected to
# hold exactly it (the terms' shares taken as independent), until the combinations chosen
# hold GATE_ROWS rows or the next would pass SCORED_ROWS; a row holding one of them is scored.
# Short of GATE_ROWS, the rows holding the next combination fill in, up to FILL_READ of them
# read and ranked by ts_rank, the best scored. Before, the rarer terms were added whole: a word
# in 40% of one agent's 100,000 rows made 40,000 rows scored, a second; "rows holding at
# least m of the terms" as the gate ranked two rare terms below four common ones (top-10
# overlap with the results before 0.885; this gate 0.958 at one agent of 100,000 rows, 0.985 at
# 10,000, docs/BENCHMARKS.md).
# The counts are the scope's own (an agent's, or an agent's session), as BM25 here takes its
# idf; an agent's are kept per process for RECOUNT_SECONDS (a scope of 10,000 rows moves little
# in that time).
PRUNE_FROM_ROWS = 10_000
GATE_ROWS = 500
SCORED_ROWS = 1_000
FILL_READ = 5_000
SAMPLED_ROWS = 5_000
SAMPLE_FROM_ROWS = 20_000
GATE_TERMS = 6
RECOUNT_SECONDS = 60.0
MAX_COUNTED_TERMS = 50_000


@dataclass
class _ScopeCounts:
    rows: int  # the scope's rows when counted
    counted_at: float  # time.monotonic()
    docs: dict[Term, int] = field(default_factory=dict)  # rows holding each term

    def current(self) -> bool:
        return (
            time.monotonic() - self.counted_at < RECOUNT_SECONDS
            and len(self.docs) < MAX_COUNTED_TERMS
        )


_SCOPE_COUNTS: dict[tuple[str, str, str], _ScopeCounts] = {}
# Held while the kept counts are walked or changed: recall's text query runs in a thread of
# its own beside the caller's (index.started).
_SCOPE_COUNTS_LOCK = threading.Lock()


def forget_term_counts() -> None:
    """Forget every kept count (tests that empty a table and fill it again)."""
    _SCOPE_COUNTS.clear()


def _scope_counts(
    table: LexicalTable,
    terms: Sequence[Term],
    scope: str,
    scope_params: list[str],
    using: str,
) -> _ScopeCounts:
    """The scope's rows and the rows holding each term: an agent's kept while current (not
    inside a transaction, whose writes may be rolled back), a session's counted each time."""
    connection = connections[using]
    key = (str(connection.settings_dict["NAME"]), table.name, scope_params[0])
    kept = len(scope_params) == 1 and not connection.in_atomic_block
    counts = _SCOPE_COUNTS.get(key) if kept else None
    name = _q(table.name)
    with connection.cursor() as cursor:
        if counts is None or not counts.current():
            cursor.execute(f"SELECT count(*) FROM {name} AS f WHERE {scope}", scope_params)
            counts = _ScopeCounts(cursor.fetchone()[0], time.monotonic())
            if kept and counts.rows >= PRUNE_FROM_ROWS:
                with _SCOPE_COUNTS_LOCK:
                    for stale in [
                        k for k, kept_counts in _SCOPE_COUNTS.items() if not kept_counts.current()
                    ]:
                        del _SCOPE_COUNTS[stale]  # agents not searched for a while
                    _SCOPE_COUNTS[key] = counts
        missing = [term for term in terms if term not in counts.docs]
        if missing:
            counts.docs.update(_term_rows(cursor, table, scope, scope_params, missing, counts.rows))
    return counts


# A term's rows as BM25 counts them: those where it matches (a word in the text or its
# context, a bigram in their CJK terms, a day's phrase), through the GIN index. A word
# unweighted: its lexemes are never CJK, so never C or D, and the index answers without
# reading each row's tsvector (3.4x faster for a frequent word). Made once per term
# (MATERIALIZED): inlined, it was made again for each row read.
_COUNTED = (
    ", counted AS MATERIALIZED (SELECT n, CASE kind WHEN 'word' THEN (SELECT "
    "string_agg(quote_literal(l), ' | ') FROM unnest(lexemes) AS l)::tsquery ELSE q END AS q "
    "FROM usable)"
)


def _term_rows(
    cursor: Any,
    table: LexicalTable,
    scope: str,
    scope_params: list[str],
    terms: list[Term],
    rows: int,
) -> dict[Term, int]:
    """The rows holding each term: counted through the index, in a scope of SAMPLE_FROM_ROWS
    rows or more up to SCORED_ROWS (past them a term gates no rows alone) and a term past them
    estimated from its share of the scope's first SAMPLED_ROWS rows (in its index's order).
    Counting a word in 40% of one agent's 100,000 rows took 100 ms; the sample reads 5,000
    rows in order, and an idf from it moves by a few hundredths. In order, through the scope's
    B-tree: without an order the planner read the sample by a sequential scan with a LIMIT for
    an agent holding a tenth of 1M rows, which started where another scan of the table was
    (synchronised scans) and read 108,000 pages before it had 5,000 of the agent's rows,
    0.4-0.6 s (docs/BENCHMARKS.md, PostgreSQL's "Context assembly"). In a smaller scope the sample
    saves little and every count is exact (10 agents of 10,000 rows: text mean 14-18 ms
    against 18-21 with the sample, top-10 overlap 0.997 against 0.985). A term is counted once
    a RECOUNT_SECONDS, and most new terms of a query are rare: a short list in the index."""
    name = _q(table.name)
    sampling = rows >= SAMPLE_FROM_ROWS
    cursor.execute(
        _TERMS + _COUNTED + f" SELECT n, (SELECT count(*) FROM (SELECT FROM {name} AS f "
        f"WHERE {scope} AND f.doc @@ counted.q{f' LIMIT {SCORED_ROWS}' if sampling else ''}) "
        "AS held) FROM counted",
        [[t.kind for t in terms], [t.text for t in terms], *scope_params],
    )
    found = {terms[number - 1]: held for number, held in cursor.fetchall()}
    frequent = [term for term, held in found.items() if sampling and held >= SCORED_ROWS]
    if frequent:
        cursor.execute(
            # One pass over the sample, each row matched against every term.
            _TERMS + _COUNTED + f" SELECT counted.n, count(*) FROM (SELECT doc FROM {name} AS "
            f"f WHERE {scope} ORDER BY {', '.join(f'f.{_q(c)}' for c in table.scopes)} "
            f"LIMIT {SAMPLED_ROWS}) AS sample JOIN counted ON sample.doc @@ "
            "counted.q GROUP BY counted.n",
            [[t.kind for t in frequent], [t.text for t in frequent], *scope_params],
        )
        sampled = min(rows, SAMPLED_ROWS)
        for number, held in cursor.fetchall():
            found[frequent[number - 1]] = max(SCORED_ROWS, round(held * rows / sampled))
    return {term: found.get(term, 0) for term in terms}  # no lexeme: matches no row


@dataclass(frozen=True)
class _Gate:
    """The rows scored: those holding every term of one of `clauses`, and up to `fill` rows
    holding every term of one of `fill_clauses`."""

    clauses: list[tuple[Term, ...]]
    fill_clauses: list[tuple[Term, ...]] = field(default_factory=list)
    fill: int = 0


def _scored_terms(terms: Sequence[Term], counts: _ScopeCounts) -> tuple[list[Term], _Gate]:
    """(the terms that weigh, the rows scored), as described above."""
    held = [term for term in terms if counts.docs[term] > 0]
    if counts.rows < PRUNE_FROM_ROWS:
        return held, _Gate([(term,) for term in held])
    weighing = [term for term in held if 2 * counts.docs[term] < counts.rows] or held
    gating = sorted(weighing, key=lambda t: counts.docs[t])[:GATE_TERMS]
    # Every combination of the gating terms a row may hold, the heaviest first, with the rows
    # expected to hold exactly it.
    held_together = []
    for size in range(1, len(gating) + 1):
        for together in itertools.combinations(gating, size):
            expected = float(counts.rows)
            for term in gating:
                share = counts.docs[term] / counts.rows
                expected *= share if term in together else 1 - share
            weight = sum(_idf(counts.docs[term], counts.rows) for term in together)
            held_together.append((weight, together, expected))
    held_together.sort(key=lambda combination: -combination[0])
    chosen: list[tuple[Term, ...]] = []
    rows = 0.0
    for _weight, together, expected in held_together:
        if rows >= GATE_ROWS or rows + expected > SCORED_ROWS:
            if rows >= GATE_ROWS:
                return weighing, _Gate(_fewest(chosen))
            # Short of GATE_ROWS: the rows of the next combination, as many as it takes.
            return weighing, _Gate(_fewest(chosen), [together], GATE_ROWS - round(rows))
        chosen.append(together)
        rows += expected
    return weighing, _Gate(_fewest(chosen))


def _idf(docs: int, rows: int) -> float:
    """A term's inverse document frequency, as the query computes it."""
    return max(math.log((rows - docs + 0.5) / (docs + 0.5)), 1e-6)


def _fewest(combinations: list[tuple[Term, ...]]) -> list[tuple[Term, ...]]:
    """Those of the combinations that hold none of the others: a row holding one of the
    others (heavier, since each of them is chosen with all its supersets) holds one of these."""
    return [
        together
        for together in combinations
        if not any(set(other) < set(together) for other in combinations)
    ]


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
    """The k best matches of one agent (optionally one session); higher score is better.

    `filters` apply to the source table's `filterable` columns, through a join; `exclude`
    names rows that must not take any of the k places.
    """
    terms = query_terms(query, now=now)
    if not terms:
        return []
    name = _q(table.name)
    scope, scope_params = ["f.agent_id = %s"], [agent_id]
    if session_id is not None:
        scope.append("f.session_id = %s")
        scope_params.append(session_id)
    scoped = " AND ".join(scope)
    counts = _scope_counts(table, terms, scoped, scope_params, using)
    terms, gate = _scored_terms(terms, counts)
    if not terms:
        return []
    join, conditions, params = "", [], []
    if filters:
        join = f"JOIN {_q(table.source)} AS source ON source.id = hit.rowid"
        for column, op, value in filters:
            conditions.append(f"source.{_q(column)} {op} %s")
            params.append(value)
    if exclude:
        conditions.append("hit.rowid <> ALL(%s)")
        params.append(list(exclude))
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    # BM25 as FTS5 computes it: a term's occurrences in a row count 1 in the text and 0.5 in
    # the context (FTS5's column weights), a row's length is its number of distinct lexemes
    # (what a tsvector tells without being unpacked), against the mean of the scored rows,
    # and a term's inverse document frequency is counted in scope (`counts`), floored just
    # above zero for terms in most rows. Each scored row's tsvector is cut down to the query's
    # lexemes before it is unnested (ts_delete of what ts_delete of them leaves): unnesting
    # whole rows took longer on LoCoMo (docs/EVALUATION.md, "PostgreSQL against SQLite").
    sql = (
        _TERMS
        # Each row's length travels with its occurrences: joined back to the rows scored, it
        # was a nested loop over both (the planner estimates 50 rows matched): seconds.
        + f", gate AS (SELECT {_CLAUSES} AS q, {_CLAUSES} AS fill, {_CLAUSES} AS fill_any), "
        "matched AS MATERIALIZED (SELECT f.rowid, f.doc, length(f.doc) AS dl FROM "
        f"{name} AS f WHERE {scoped} AND f.doc @@ (SELECT q FROM gate) UNION ALL (SELECT "
        f"rowid, doc, length(doc) FROM (SELECT f.rowid, f.doc FROM {name} AS f WHERE {scoped} "
        "AND f.doc @@ (SELECT fill FROM gate) AND NOT coalesce(f.doc @@ (SELECT q FROM gate), "
        f"false) LIMIT {FILL_READ}) AS candidate ORDER BY ts_rank('{_FILL_WEIGHTS}', doc, "
        "(SELECT fill_any FROM gate), 1) DESC, rowid LIMIT %s)), "
        "occurrence AS (SELECT m.rowid, m.dl, t.n, CASE w WHEN t.text_weight THEN 1.0::float8 "
        "WHEN t.context_weight THEN 0.5 ELSE 0 END AS weight FROM matched AS m "
        "CROSS JOIN LATERAL unnest(ts_delete(m.doc, tsvector_to_array(ts_delete(m.doc, "
        "(SELECT array_agg(lexeme) FROM term_lexeme))))) AS x "
        "JOIN term_lexeme AS t ON t.lexeme = x.lexeme "
        "CROSS JOIN LATERAL unnest(x.weights) AS w "
        "UNION ALL SELECT m.rowid, m.dl, u.n, 1.0::float8 FROM matched AS m JOIN usable AS u "
        "ON u.kind = 'day' AND m.doc @@ u.q), "
        "hit AS (SELECT rowid, dl, n, sum(weight) AS tf FROM occurrence GROUP BY rowid, dl, n "
        "HAVING sum(weight) > 0), "
        # float8, not numeric: numeric's ln and divisions per row took a quarter of the time.
        "idf AS (SELECT n, greatest(ln((%s - df + 0.5) / (df + 0.5)), 1e-6) AS idf "
        "FROM unnest(%s::float8[]) WITH ORDINALITY AS d(df, n)) "
        f"SELECT hit.rowid, sum(idf.idf * hit.tf * {BM25_K1 + 1} / (hit.tf + {BM25_K1} * "
        f"(1 - {BM25_B} + {BM25_B} * hit.dl / mean.dl))) AS score FROM hit JOIN idf USING (n) "
        f"CROSS JOIN (SELECT avg(dl::float8) AS dl FROM matched) AS mean {join} {where} "
        "GROUP BY hit.rowid ORDER BY score DESC, hit.rowid LIMIT %s"
    )
    kinds = [term.kind for term in terms]
    texts = [term.text for term in terms]
    numbers = {term: number for number, term in enumerate(terms, start=1)}

    def clauses(of: list[tuple[Term, ...]]) -> list[str]:
        return [",".join(str(numbers[term]) for term in clause) for clause in of]

    docs = [counts.docs[term] for term in terms]
    with connections[using].cursor() as cursor:
        cursor.execute(
            sql,
            [
                *(kinds, texts, clauses(gate.clauses), clauses(gate.fill_clauses)),
                clauses([(term,) for clause in gate.fill_clauses for term in clause]),
                *(*scope_params, *scope_params, gate.fill),
                *(counts.rows, docs, *params, k),
            ],
        )
        return [Hit(row_id, score) for row_id, score in cursor.fetchall()]
