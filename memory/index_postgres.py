"""The PostgreSQL engine of the indexes: pgvector for vectors, full text search for text.

Vectors: one table per searchable table (`vector(dim)`, the same metadata columns as vec0),
with an HNSW index (cosine) and a B-tree on `agent_id`. A KNN is one agent's: pgvector 0.8's
iterative index scan (`hnsw.iterative_scan`, set on every connection) keeps walking the graph
until k rows of that agent pass the filter, and for a small agent the planner prefers the
B-tree and sorts exactly (docs/BENCHMARKS.md).

Text: one table per searchable table, filled by triggers (migration 0013), holding one
`tsvector` per row whose weights say where a lexeme came from, as FTS5's columns do:
A the words of the text (English stemming that keeps stop words, as FTS5's porter does;
after the date label for messages), C its CJK
unigrams and bigrams (memory.text's scheme, computed in SQL by `orca_cjk_terms`), B and D the
words and CJK terms of the two messages before it. A word matches A and B, a CJK bigram C and
D, with the weights of the SQLite engine (context counts half). The score is BM25-like: each
term's `ts_rank` times its inverse document frequency in the scope, since
`ts_rank` alone would let a common word outrank a rare one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connections

from memory.index_schema import (
    VECTOR_TABLES,
    Filter,
    Hit,
    LexicalTable,
    VectorIndexStatus,
    VectorTable,
    query_terms,
)

# ts_rank's weights of D, C, B and A (see the module's docstring).
RANK_WEIGHTS = "{0.5, 1.0, 0.5, 1.0}"
# How far the HNSW search looks for each query: at least the k the context asks (100).
EF_SEARCH = 100


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def prepare_connection(*, connection: Any, **_: Any) -> None:
    """`connection_created` receiver: iterative HNSW scans, so a filtered KNN fills its k."""
    with connection.connection.cursor() as cursor:
        cursor.execute(f"SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = {EF_SEARCH}")


def database_report(*, using: str = "default") -> dict[str, object]:
    with connections[using].cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    return {"engine": "postgresql", "postgres_version": version}


# --- vectors -------------------------------------------------------------------------------


def vector_table_sql(table: VectorTable, dimension: int) -> list[str]:
    columns = "".join(
        f", {_q(column)} {'bigint' if kind == 'integer' else 'text'}"
        for column, kind in table.metadata.items()
    )
    name = _q(table.name)
    return [
        f"CREATE TABLE IF NOT EXISTS {name} ({_q(table.key)} bigint PRIMARY KEY, "
        f"agent_id text NOT NULL{columns}, embedding vector({int(dimension)}) NOT NULL)",
        # pgvector's EXTERNAL storage puts vectors of more than ~500 dimensions in the TOAST
        # table: an exact scan then reads each through the TOAST index, and the planner,
        # seeing a heap of a few MB, prefers it to the HNSW index (one agent, 100k x 1024:
        # a 515 ms sequential scan). MAIN keeps a vector in its row while the row fits a page.
        f"ALTER TABLE {name} ALTER COLUMN embedding SET STORAGE MAIN",
        f"CREATE INDEX IF NOT EXISTS {_q(table.name + '_agent')} ON {name} (agent_id)",
        f"CREATE INDEX IF NOT EXISTS {_q(table.name + '_hnsw')} ON {name} "
        "USING hnsw (embedding vector_cosine_ops)",
    ]


def create_vector_tables(*, dimension: int, using: str = "default") -> None:
    with connections[using].cursor() as cursor:
        for table in VECTOR_TABLES:
            for statement in vector_table_sql(table, dimension):
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
    return "[" + ",".join(repr(float(x)) for x in embedding) + "]"


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
    columns = [table.key, "agent_id", *metadata, "embedding"]
    values = [row_id, agent_id, *metadata.values(), _as_vector(embedding)]
    updates = ", ".join(f"{_q(c)} = EXCLUDED.{_q(c)}" for c in columns[1:])
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_q(table.name)} ({', '.join(map(_q, columns))}) "
            f"VALUES ({', '.join(['%s'] * (len(values) - 1))}, %s::vector) "
            f"ON CONFLICT ({_q(table.key)}) DO UPDATE SET {updates}",
            values,
        )


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
    sql = (
        f"WITH nearest AS MATERIALIZED (SELECT {_q(table.key)} AS id, "
        f"embedding <=> %s::vector AS distance FROM {_q(table.name)} "
        f"WHERE {' AND '.join(conditions)} ORDER BY distance LIMIT %s) "
        "SELECT id, distance FROM nearest ORDER BY distance, id"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [_as_vector(embedding), *params, k])
        return [Hit(row_id, 1 - distance) for row_id, distance in cursor.fetchall()]


# --- text ----------------------------------------------------------------------------------

# Each term of the query as a tsquery: a word as its English lexemes (as the trigger indexed
# the text: to_tsvector) on weights A and B; a CJK bigram as itself on C and D; a day as the
# phrase of its label's words ("2 May 2023").
_TERMS = """
WITH term AS (
    SELECT t.n, CASE t.kind
        WHEN 'bigram' THEN (quote_literal(t.text) || ':CD')::tsquery
        WHEN 'word' THEN (
            SELECT string_agg(quote_literal(lexeme) || ':AB', ' | ')
            FROM unnest(tsvector_to_array(to_tsvector('orca_english', t.text))) AS lexeme
        )::tsquery
        ELSE phraseto_tsquery('orca_english', t.text)
    END AS q
    FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(kind, text, n)
), usable AS (SELECT n, q FROM term WHERE q IS NOT NULL AND numnode(q) > 0)
"""


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
    scoped = " AND ".join(scope)
    sql = (
        _TERMS
        + f", matched AS (SELECT f.rowid, f.doc FROM {name} AS f WHERE {scoped} AND f.doc @@ "
        "(SELECT string_agg('(' || q::text || ')', ' | ')::tsquery FROM usable)), "
        f"hit AS (SELECT m.rowid, u.n, ts_rank('{RANK_WEIGHTS}', m.doc, u.q) AS rank "
        "FROM matched AS m JOIN usable AS u ON m.doc @@ u.q), "
        # MATERIALIZED: inlined, the planner (estimating one hit) ran the count of the
        # agent's rows once per hit: 15,397 times, 22 s (100k messages, 10 agents).
        "df AS MATERIALIZED (SELECT n, count(*) AS df FROM hit GROUP BY n), "
        f"total AS MATERIALIZED (SELECT count(*) AS n FROM {name} AS f WHERE {scoped}) "
        "SELECT hit.rowid, sum(hit.rank * ln(1 + (total.n - df.df + 0.5) / (df.df + 0.5))) "
        f"AS score FROM hit JOIN df USING (n) CROSS JOIN total {join} {where} "
        "GROUP BY hit.rowid ORDER BY score DESC, hit.rowid LIMIT %s"
    )
    kinds = [term.kind for term in terms]
    texts = [term.text for term in terms]
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [kinds, texts, *scope_params, *scope_params, *params, k])
        return [Hit(row_id, score) for row_id, score in cursor.fetchall()]
