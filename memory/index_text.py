"""The SQLite engine's derived text index: a large agent's messages as BM25 posting lists.

FTS5's bm25() reads each query phrase's whole row list for its idf on every query (the
agent's scope token among them) and scores every row the expression matches: both grow with
the agent, to 25-65 ms for recall's text query at 100,000 messages of one agent
(docs/BENCHMARKS.md, "Recall's text query"). So this process keeps, per (database, agent) of
at least `MIN_ROWS` messages, the agent's rows of `fts_main_messages` as FTS5 tokenized them
(read back through a contentless FTS5 table of the same tokenizer, so the same porter stems):
per term the rows holding it with a count per column, and each row's length. A query is
scored as FTS5's bm25() scores it (k1 1.2, b 0.75, the columns weighted 1, 1, 0.5, 0, 0, idf
floored at 1e-6) with the whole table's row count and mean length (FTS5's own totals, read
from its averages record) and the whole table's count of rows holding each term (the agent's
from here, other agents' counted by FTS5 once and kept while they write nothing), so every
row returned has FTS5's score; the best rows are found by max-score pruning (`search`).

It answers recall's message query only: one agent, no session scope, no filters, one token
per term (a day is a phrase of several: FTS5 answers). FTS5 answers inside a transaction,
for agents under `MIN_ROWS`, while an agent's index is being built (in a background thread),
and for an agent whose index is over `text_index_mb` (`ORCA_TEXT_INDEX_MB`).

Kept current through the change log `text_changes`, which triggers on `main_messages` write
in the writer's transaction (migration 0027: the same writes that change the FTS5 table,
`reindex_messages` included, since it sets `content`). Before answering, an index reads the
entries after the last one it applied and reads those rows again from FTS5: so an edited or
deleted message's old text is never returned once the change has committed, in any process.
Changed rows go to a small second segment; once it passes `REBUILD_SHARE` of the rows, the
index is built again in the background. The log keeps its newest `RETAIN_CHANGES` entries
(the triggers prune it); an index behind those, or a log that went backwards, is rebuilt.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connections

from memory import index_numpy
from memory.index_schema import MESSAGE_TEXT, Hit, Term

logger = logging.getLogger(__name__)

CHANGES = "text_changes"
# The log keeps this many entries: a process that has not looked for longer rebuilds.
RETAIN_CHANGES = 100_000
# An agent's messages from which the index answers: below, FTS5's gated query takes a few ms
# (5-6 ms at p50 for an agent of 10,000 among 10, about what the index took there with the
# other agents' counts; docs/BENCHMARKS.md, "Recall's text query").
MIN_ROWS = 20_000
# FTS5's columns of a message row, the weights recall's query gives them, and the columns each
# kind of term is matched in (index_sqlite._COLUMNS; days are phrases: FTS5 answers).
COLUMNS = ("body", "cjk", "ctx", "agent_id", "session_id")
WEIGHTS = np.array([1.0, 1.0, 0.5, 0.0, 0.0])
KIND_COLUMNS = {"word": [0, 2], "bigram": [1, 2]}
K1, B = 1.2, 0.75
TOKENIZER = "porter unicode61 remove_diacritics 2"  # the FTS5 tables' (index_sqlite)
# Once the rows of the terms to look at are this share of the agent's, every row is scored.
DENSE_SHARE = 0.05
# Rows changed since the build beyond this share of them: the index is built again.
REBUILD_SHARE = 0.1
# Rows read and tokenized at a time while building.
BUILD_BATCH = 10_000
# Query terms whose tokens are kept per process, and whose rows (and other agents' counts) an
# index keeps until a change: a frequent term's rows take a few hundred KiB.
MAX_KEPT_TOKENS = 100_000
MAX_KEPT_TERMS = 1_000

_SCRATCH = "temp.orca_text_rows"


def change_log_sql() -> list[tuple[str, str]]:
    """(forward, reverse) statements: the change log, and the triggers on `main_messages` that
    write it with every write that changes the message's FTS5 row (index_sqlite's sync
    triggers watch the same columns), pruning it to its newest RETAIN_CHANGES entries.

    Migration 0027 holds this text frozen (tests/test_migrations.py compares them).
    """
    log = f'"{CHANGES}"'
    entry = f"INSERT INTO {log} (agent_id, row_id) VALUES"
    prune = f"DELETE FROM {log} WHERE id <= (SELECT max(id) FROM {log}) - {RETAIN_CHANGES};"
    moved = (
        f"INSERT INTO {log} (agent_id, row_id) SELECT new.agent_id, new.id "
        "WHERE new.agent_id IS NOT old.agent_id;"
    )
    triggers = {
        "insert": ("AFTER INSERT", f"{entry} (new.agent_id, new.id); {prune}"),
        "delete": ("AFTER DELETE", f"{entry} (old.agent_id, old.id); {prune}"),
        "update": (
            'AFTER UPDATE OF "content", "agent_id", "session_id"',
            f"{entry} (old.agent_id, old.id); {moved} {prune}",
        ),
    }
    return [
        (
            f"CREATE TABLE {log} (id integer NOT NULL PRIMARY KEY AUTOINCREMENT, "
            "agent_id text NOT NULL, row_id integer NOT NULL)",
            f"DROP TABLE {log}",
        ),
        *(
            (
                f'CREATE TRIGGER "{CHANGES}_{event}" {when} ON "main_messages" BEGIN {body} END',
                f'DROP TRIGGER "{CHANGES}_{event}"',
            )
            for event, (when, body) in triggers.items()
        ),
    ]


def _limit() -> int:
    return int(settings.ORCA.text_index_mb) * 1024 * 1024


# --- reading FTS5's tokens -------------------------------------------------------------------


def _scratch(cursor) -> None:
    """This connection's contentless FTS5 table of the same tokenizer, and its vocabularies."""
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {_SCRATCH} USING fts5("
        f"{', '.join(COLUMNS)}, content='', tokenize='{TOKENIZER}')"
    )
    cursor.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.orca_text_terms "
        "USING fts5vocab(temp, orca_text_rows, row)"
    )
    cursor.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.orca_text_tokens "
        "USING fts5vocab(temp, orca_text_rows, instance)"
    )


# A posting's bytes: its term or row (int32), column (int8) and count (int32).
_POSTING_BYTES = 9


@dataclass
class _Postings:
    """Rows' tokens: per row its rowid and length (all columns), one posting per (term, row,
    column) with its count; `rows` index `rowids`."""

    rowids: np.ndarray
    lengths: np.ndarray
    terms: np.ndarray
    rows: np.ndarray
    columns: np.ndarray
    counts: np.ndarray


def _tokenized(cursor, rows: Sequence[tuple], vocabulary: dict[str, int]) -> _Postings:
    """The postings of these FTS5 rows (rowid and the five columns, ascending rowid), their
    terms numbered by `vocabulary` (new terms added)."""
    if not rows:
        none = np.zeros(0, np.int32)
        return _Postings(np.zeros(0, np.int64), np.zeros(0), none, none, np.zeros(0, np.int8), none)
    _scratch(cursor)
    cursor.execute(f"INSERT INTO {_SCRATCH} ({_SCRATCH.split('.')[1]}) VALUES ('delete-all')")
    cursor.executemany(
        f"INSERT INTO {_SCRATCH} (rowid, {', '.join(COLUMNS)}) VALUES (%s, %s, %s, %s, %s, %s)",
        rows,
    )
    cursor.execute("SELECT term, cnt FROM temp.orca_text_terms")
    names, counts = [], []
    for term, count in cursor.fetchall():
        names.append(term)
        counts.append(count)
    numbers = np.fromiter(
        (vocabulary.setdefault(name, len(vocabulary)) for name in names), np.int64, len(names)
    )
    case = " ".join(f"WHEN '{name}' THEN {number}" for number, name in enumerate(COLUMNS))
    # fts5vocab lists instances by term, as its row table counts them.
    cursor.execute(f"SELECT doc * 8 + CASE col {case} END FROM temp.orca_text_tokens")
    packed = np.fromiter((value for (value,) in cursor.fetchall()), np.int64)
    cursor.execute(f"INSERT INTO {_SCRATCH} ({_SCRATCH.split('.')[1]}) VALUES ('delete-all')")
    assert len(packed) == sum(counts), "fts5vocab's instances differ from its counts"
    rowids = np.asarray([row[0] for row in rows], dtype=np.int64)
    positions = np.searchsorted(rowids, packed >> 3)
    lengths = np.bincount(positions, minlength=len(rowids)).astype(np.float64)
    term_ids = np.repeat(numbers, np.asarray(counts, dtype=np.int64))
    width = len(COLUMNS)
    key = (term_ids * len(rowids) + positions) * width + (packed & 7)
    unique, found = np.unique(key, return_counts=True)
    return _Postings(
        rowids,
        lengths,
        (unique // (width * len(rowids))).astype(np.int32),
        ((unique // width) % len(rowids)).astype(np.int32),
        (unique % width).astype(np.int8),
        found.astype(np.int32),
    )


FTS_ROWS = f"SELECT rowid, {', '.join(COLUMNS)} FROM fts_main_messages"


def _agent_rows(cursor, token: str, after: int, limit: int) -> list[tuple]:
    cursor.execute(
        f"{FTS_ROWS} WHERE fts_main_messages MATCH %s AND rowid > %s ORDER BY rowid LIMIT %s",
        [f'agent_id:"{token}"', after, limit],
    )
    return cursor.fetchall()


def _rows_by_id(cursor, row_ids: list[int], token: str) -> list[tuple]:
    """These rows as FTS5 holds them now, those of the agent (a deleted row is missing)."""
    found: list[tuple] = []
    for start in range(0, len(row_ids), 500):
        part = row_ids[start : start + 500]
        cursor.execute(f"{FTS_ROWS} WHERE rowid IN ({', '.join(['%s'] * len(part))})", part)
        found.extend(row for row in cursor.fetchall() if row[4] == token)
    return sorted(found)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at `at`: (value, the offset after it)."""
    value = 0
    for n in range(8):
        byte = data[at + n]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + n + 1
    return (value << 8) | data[at + 8], at + 9


def table_totals(cursor) -> tuple[int, int]:
    """(rows, tokens in every column) of the whole FTS5 table, as bm25() reads them: FTS5's
    averages record (rowid 1 of its data table: a varint row count, then one total per
    column)."""
    cursor.execute("SELECT block FROM fts_main_messages_data WHERE id = 1")
    found = cursor.fetchone()
    if found is None or not found[0]:
        return 0, 0
    data = bytes(found[0])
    rows, at = _varint(data, 0)
    tokens = 0
    while at < len(data):
        total, at = _varint(data, at)
        tokens += total
    return rows, tokens


# --- one agent's index ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Segment:
    """Postings sorted by term: term t's are [starts[t], starts[t + 1])."""

    starts: np.ndarray
    rows: np.ndarray  # positions in the index
    columns: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, parts: list[_Postings], offsets: list[int], terms: int) -> _Segment:
        if not parts:
            return cls(np.zeros(terms + 1, np.int64), *(np.zeros(0, t) for t in "iii"))
        term_ids = np.concatenate([p.terms for p in parts])
        rows = np.concatenate([p.rows + o for p, o in zip(parts, offsets, strict=True)])
        order = np.argsort(term_ids, kind="stable")
        return cls(
            np.searchsorted(term_ids[order], np.arange(terms + 1)),
            rows[order].astype(np.int32),
            np.concatenate([p.columns for p in parts])[order],
            np.concatenate([p.counts for p in parts])[order],
        )

    def span(self, term: int) -> slice:
        if term + 1 >= len(self.starts):
            return slice(0, 0)
        return slice(self.starts[term], self.starts[term + 1])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.starts, self.rows, self.columns, self.counts))


@dataclass(frozen=True)
class _Matches:
    """A term's rows in the index (positions, ascending) and its weighted count in each."""

    rows: np.ndarray
    frequency: np.ndarray


@dataclass
class TextIndex:
    """One agent's rows: a built segment (rowids ascending) and the rows changed since."""

    token: str  # the agent's scope token
    seen: int  # the last change log entry applied
    vocabulary: dict[str, int]
    rowids: np.ndarray
    lengths: np.ndarray
    alive: np.ndarray
    built: _Segment
    built_rows: int
    changed: list[_Postings] = field(default_factory=list)
    changed_at: list[int] = field(default_factory=list)  # each part's first position
    recent: _Segment | None = None
    position: dict[int, int] = field(default_factory=dict)  # changed rows: rowid -> position
    matches: dict[int, _Matches] = field(default_factory=dict)  # by term, until a change
    others: dict[Term, int] = field(default_factory=dict)  # other agents' rows per term
    others_seen: int = 0  # the log entry those counts are current at
    rebuilding: bool = False

    @classmethod
    def of(cls, token: str, seen: int, parts: list[_Postings], vocabulary: dict[str, int]):
        offsets = list(np.cumsum([0, *(len(p.rowids) for p in parts)])[:-1])
        rowids = np.concatenate([p.rowids for p in parts]) if parts else np.zeros(0, np.int64)
        lengths = np.concatenate([p.lengths for p in parts]) if parts else np.zeros(0)
        return cls(
            token,
            seen,
            vocabulary,
            rowids,
            lengths,
            np.ones(len(rowids), dtype=bool),
            _Segment.of(parts, offsets, len(vocabulary)),
            len(rowids),
            others_seen=seen,
        )

    @property
    def live(self) -> int:
        return int(self.alive.sum())

    @property
    def nbytes(self) -> int:
        arrays = (self.rowids, self.lengths, self.alive)
        total = sum(a.nbytes for a in arrays) + self.built.nbytes
        total += sum(_POSTING_BYTES * len(p.terms) + p.rowids.nbytes * 2 for p in self.changed)
        # Python's dicts: about 100 bytes an entry.
        return total + 100 * (len(self.vocabulary) + len(self.position))

    def stale(self) -> bool:
        return len(self.rowids) - self.built_rows > max(1000, self.built_rows * REBUILD_SHARE)

    def _at(self, row_id: int) -> int | None:
        """The live position of a row, or None."""
        if row_id in self.position:
            return self.position[row_id]
        at = int(np.searchsorted(self.rowids[: self.built_rows], row_id))
        if at < self.built_rows and self.rowids[at] == row_id and self.alive[at]:
            return at
        return None

    def apply(self, row_ids: list[int], rows: _Postings, seen: int) -> None:
        """These rows changed: those in `rows` are as they are now, the others deleted."""
        for row_id in row_ids:
            at = self._at(row_id)
            if at is not None:
                self.alive[at] = False
                self.position.pop(row_id, None)
        if len(rows.rowids):
            first = len(self.rowids)
            self.changed.append(rows)
            self.changed_at.append(first)
            self.rowids = np.concatenate([self.rowids, rows.rowids])
            self.lengths = np.concatenate([self.lengths, rows.lengths])
            self.alive = np.concatenate([self.alive, np.ones(len(rows.rowids), dtype=bool)])
            self.position.update((int(r), first + i) for i, r in enumerate(rows.rowids))
            self.recent = None
        self.matches.clear()
        self.seen = seen

    def term_matches(self, token: str, kind: str) -> _Matches:
        """The live rows holding the token in the kind's columns, with its weighted count."""
        number = self.vocabulary.get(token)
        if number is None:
            return _Matches(np.zeros(0, np.int64), np.zeros(0))
        if number not in self.matches:
            if len(self.matches) >= MAX_KEPT_TERMS:
                self.matches.clear()
            if self.recent is None:
                self.recent = _Segment.of(self.changed, self.changed_at, len(self.vocabulary))
            rows, columns, counts = [], [], []
            for segment in (self.built, self.recent):
                span = segment.span(number)
                rows.append(segment.rows[span])
                columns.append(segment.columns[span])
                counts.append(segment.counts[span])
            row, column, count = map(np.concatenate, (rows, columns, counts))
            wanted = np.isin(column, KIND_COLUMNS[kind]) & self.alive[row]
            held, where = np.unique(row[wanted], return_inverse=True)
            weights = WEIGHTS[column[wanted]] * count[wanted]
            self.matches[number] = _Matches(held, np.bincount(where, weights=weights))
        return self.matches[number]


@dataclass(frozen=True)
class _Part:
    """A term's bm25 part in each row holding it (positions ascending)."""

    rows: np.ndarray
    scores: np.ndarray


def search(
    index: TextIndex,
    parts: list[_Part],
    exclude: Collection[int],
    k: int,
) -> list[Hit]:
    """The k best rows of the index for these terms' parts, best first, as FTS5's bm25 ranks
    them (ties in rowid order).

    Max-score pruning: the rows of the rarest terms are scored with every term first; a row
    holding none of them scores at most the other terms' largest parts added up, so once the
    k-th score found is above that sum, no other row can take a place. Else the next rarest
    term's rows join, until the sum is passed or every term's rows are in.
    """
    parts = [part for part in parts if len(part.rows)]
    excluded = np.asarray(
        sorted(at for at in map(index._at, exclude) if at is not None), dtype=np.int64
    )
    rarest = sorted(range(len(parts)), key=lambda i: len(parts[i].rows))
    maxima = [float(parts[i].scores.max()) for i in rarest]
    bounds = [sum(maxima[n:]) for n in range(len(parts) + 1)]
    dense = index.live * DENSE_SHARE
    for gate in range(1, len(parts) + 1):
        if sum(len(parts[i].rows) for i in rarest[:gate]) > dense:
            return _every_row(index, parts, excluded, k)
        rows = np.unique(np.concatenate([parts[i].rows for i in rarest[:gate]]))
        rows = rows[~np.isin(rows, excluded)]
        scores = np.zeros(len(rows))
        for part in parts:  # in the query's order, as FTS5 adds them
            scores += _looked_up(part, rows)
        best = _best(rows, scores, index.rowids, k)
        if gate == len(parts) or (len(best) == k and scores[best[-1]] > bounds[gate]):
            return [Hit(int(index.rowids[rows[i]]), float(scores[i])) for i in best]
    return []


def _every_row(index: TextIndex, parts: list[_Part], excluded: np.ndarray, k: int) -> list[Hit]:
    """search's answer from a score for every row: cheaper once the rows to look at are a
    large share of the agent's."""
    scores = np.zeros(len(index.rowids))
    for part in parts:
        scores[part.rows] += part.scores
    scores[excluded] = 0
    rows = np.arange(len(index.rowids))
    return [
        Hit(int(index.rowids[i]), float(scores[i])) for i in _best(rows, scores, index.rowids, k)
    ]


def _looked_up(part: _Part, rows: np.ndarray) -> np.ndarray:
    """The part's score at each of these rows (sorted positions), 0 where it has none."""
    at = np.minimum(np.searchsorted(part.rows, rows), len(part.rows) - 1)
    return np.where(part.rows[at] == rows, part.scores[at], 0.0)


def _best(rows: np.ndarray, scores: np.ndarray, rowids: np.ndarray, k: int) -> np.ndarray:
    """Indexes into `rows` of the k best scores above 0, best first; ties in rowid order."""
    if k < len(scores):  # every row tied with the k-th is a candidate
        kth = -np.partition(-scores, k - 1)[k - 1]
        chosen = np.flatnonzero((scores >= kth) & (scores > 0))
    else:
        chosen = np.flatnonzero(scores > 0)
    return chosen[np.lexsort((rowids[rows[chosen]], -scores[chosen]))][:k]


# --- this process's indexes ------------------------------------------------------------------


@dataclass
class _Size:
    """An agent's message count, and the log's newest entry when it was counted."""

    rows: int
    at: int


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.indexes: OrderedDict[tuple[str, str], TextIndex] = OrderedDict()
        self.sizes: dict[tuple[str, str], _Size] = {}
        self.building: set[tuple[str, str]] = set()
        # Agents whose index came out over the bound, or failed: FTS5 answers them from then on.
        self.refused: set[tuple[str, str]] = set()
        self.builds: list[threading.Thread] = []
        self.tokens: dict[str, tuple[str, ...]] = {}

    def clear(self) -> None:
        with self.lock:
            self.indexes.clear()
            self.sizes.clear()
            self.refused.clear()
            self.tokens.clear()


_CACHE = _Cache()


def clear() -> None:
    """Forget every index (tests)."""
    _CACHE.clear()


def settle() -> None:
    """Wait for the indexes being built (tests, and the benchmark's warm-up)."""
    index_numpy.join_builds(_CACHE.lock, _CACHE.builds)


@dataclass(frozen=True)
class CacheReport:
    indexes: int
    rows: int
    bytes: int
    limit_bytes: int


def report() -> CacheReport:
    with _CACHE.lock:
        indexes = list(_CACHE.indexes.values())
        return CacheReport(
            len(indexes), sum(i.live for i in indexes), sum(i.nbytes for i in indexes), _limit()
        )


LOG_BOUNDS = f"SELECT (SELECT min(id) FROM {CHANGES}), (SELECT max(id) FROM {CHANGES})"


def _log_bounds(cursor) -> tuple[int, int]:
    cursor.execute(LOG_BOUNDS)
    first, last = cursor.fetchone()
    return first or 0, last or 0


def answers(table_name: str, *, session_id: str | None, filters: Sequence, using: str) -> bool:
    """Whether the index may answer this query: recall's message query (one agent, no session,
    no filters), outside a transaction (only committed data is indexed), the index on."""
    return (
        table_name == MESSAGE_TEXT.name
        and session_id is None
        and not filters
        and _limit() > 0
        and not connections[using].in_atomic_block
    )


def lexical_search(
    *,
    agent_id: str,
    token: str,
    terms: Sequence[Term],
    exclude: Collection[int],
    k: int,
    weighing: Callable[[list[Term], dict[Term, int], int], list[Term]],
    count: Callable[[Term], int],
    using: str,
) -> list[Hit] | None:
    """The agent's k best rows for the terms as FTS5's bm25() ranks the whole query, or None
    where FTS5 must answer (a small agent, an index not built yet or over the bound, a term
    of several tokens). `weighing(terms, rows holding each, table rows)` leaves out the terms
    that weigh nothing, as the FTS5 query does; `count(term)`: the table's rows holding it."""
    if any(term.kind not in KIND_COLUMNS for term in terms):
        return None
    key = (str(connections[using].settings_dict["NAME"]), agent_id)
    with _CACHE.lock, connections[using].cursor() as cursor:
        rows, total_tokens = table_totals(cursor)
        if rows < MIN_ROWS or key in _CACHE.refused:
            return None  # no agent is large (a small store pays this one lookup)
        first, last = _log_bounds(cursor)
        index = _current(cursor, key, agent_id, token, first, last, using)
        if index is None:
            return None
        tokens = _tokens(cursor, terms)
        if tokens is None:
            return None
        own = [index.term_matches(tokens[term], term.kind) for term in terms]
        held = _held(index, terms, own, rows, last, count, cursor)
        if held is None:
            return None
        chosen = weighing(list(terms), held, rows)
        norm = K1 * (1 - B + B * index.lengths / (total_tokens / max(rows, 1)))
        parts = [_part(own[terms.index(t)], held[t], rows, norm) for t in chosen]
        return search(index, parts, exclude, k)


def _part(matches: _Matches, held: int, rows: int, norm: np.ndarray) -> _Part:
    idf = math.log((rows - held + 0.5) / (held + 0.5))
    idf = idf if idf > 0 else 1e-6
    frequency = matches.frequency
    return _Part(matches.rows, idf * (frequency * (K1 + 1)) / (frequency + norm[matches.rows]))


def _held(
    index: TextIndex,
    terms: Sequence[Term],
    own: list[_Matches],
    rows: int,
    last: int,
    count: Callable[[Term], int],
    cursor,
) -> dict[Term, int] | None:
    """The whole table's rows holding each term: the agent's from the index, the others'
    counted by FTS5 (none when the agent holds every row). None when a write committed
    meanwhile (the counts would mix two states: FTS5 answers)."""
    live = index.live
    held = {term: len(matches.rows) for term, matches in zip(terms, own, strict=True)}
    if rows == live:
        return held
    missing = [term for term in terms if term not in index.others]
    if len(index.others) + len(missing) > MAX_KEPT_TERMS:
        index.others.clear()
        missing = list(terms)
    if missing:
        for term in missing:
            index.others[term] = count(term) - held[term]
        if _log_bounds(cursor)[1] != last:
            index.others.clear()
            return None
    return {term: n + index.others[term] for term, n in held.items()}


def _tokens(cursor, terms: Sequence[Term]) -> dict[Term, str] | None:
    """Each term's one FTS5 token; None if one has several or none (a phrase). The terms not
    seen before are tokenized together, one scratch row each."""
    new = list(dict.fromkeys(term.text for term in terms if term.text not in _CACHE.tokens))
    if len(_CACHE.tokens) + len(new) > MAX_KEPT_TOKENS:
        _CACHE.tokens.clear()
        new = list(dict.fromkeys(term.text for term in terms))
    if new:
        _scratch(cursor)
        table = _SCRATCH.split(".")[1]
        cursor.execute(f"INSERT INTO {_SCRATCH} ({table}) VALUES ('delete-all')")
        cursor.executemany(
            f"INSERT INTO {_SCRATCH} (rowid, body) VALUES (%s, %s)", list(enumerate(new))
        )
        cursor.execute("SELECT doc, term FROM temp.orca_text_tokens ORDER BY doc, offset")
        found: dict[int, list[str]] = {}
        for doc, token in cursor.fetchall():
            found.setdefault(doc, []).append(token)
        cursor.execute(f"INSERT INTO {_SCRATCH} ({table}) VALUES ('delete-all')")
        for number, text in enumerate(new):
            _CACHE.tokens[text] = tuple(found.get(number, ()))
    tokens = {term: _CACHE.tokens[term.text] for term in terms}
    if any(len(found) != 1 for found in tokens.values()):
        return None
    return {term: found[0] for term, found in tokens.items()}


def _current(
    cursor,
    key: tuple[str, str],
    agent_id: str,
    token: str,
    first: int,
    last: int,
    using: str,
) -> TextIndex | None:
    """The agent's index brought up to the log's newest entry; None (FTS5 answers) while it
    is small, being built, or behind what the log still holds (built again)."""
    index = _CACHE.indexes.pop(key, None)
    if index is not None and (index.seen > last or index.seen < first - 1):
        index = None  # the log went backwards (another database file), or was pruned past it
    if index is not None and last > index.seen:
        mine, others = _changes(cursor, agent_id, index.seen)
        if others:
            index.others.clear()
        if mine:
            rows = _rows_by_id(cursor, mine, token)
            index.apply(mine, _tokenized(cursor, rows, index.vocabulary), last)
        index.seen = last
    if index is None:
        if key not in _CACHE.building and _large(cursor, key, agent_id, last):
            _start_build(key, agent_id, token, using)
        return None
    _CACHE.indexes[key] = index  # now the most recently used
    if index.stale() and not index.rebuilding:
        index.rebuilding = True
        _start_build(key, agent_id, token, using)
    return index


def _changes(cursor, agent_id: str, after: int) -> tuple[list[int], bool]:
    """(the agent's rows changed since log entry `after`, whether other agents' changed)."""
    cursor.execute(f"SELECT agent_id, row_id FROM {CHANGES} WHERE id > %s", [after])
    mine: dict[int, None] = {}
    others = False
    for owner, row_id in cursor.fetchall():
        if owner == agent_id:
            mine[row_id] = None
        else:
            others = True
    return list(mine), others


def _large(cursor, key: tuple[str, str], agent_id: str, last: int) -> bool:
    """Whether the agent has MIN_ROWS messages; counted again only once enough writes have
    been logged since to have taken it there (each message written logs one entry)."""
    size = _CACHE.sizes.get(key)
    if size is not None and size.at <= last and last - size.at < MIN_ROWS - size.rows:
        return False
    cursor.execute("SELECT count(*) FROM main_messages WHERE agent_id = %s", [agent_id])
    (rows,) = cursor.fetchone()
    _CACHE.sizes[key] = _Size(rows, last)
    return rows >= MIN_ROWS


def _start_build(key: tuple[str, str], agent_id: str, token: str, using: str) -> None:
    if key in _CACHE.building:
        return
    _CACHE.building.add(key)
    thread = threading.Thread(
        target=_build, args=(key, agent_id, token, using), name="orca-text", daemon=True
    )
    _CACHE.builds.append(thread)
    thread.start()


def _build(key: tuple[str, str], agent_id: str, token: str, using: str) -> None:
    """The thread's work: the agent's rows read on a connection of its own, then the index put
    in place under the lock (caught up by the next query from the log entry it was read at)."""
    connection = connections.create_connection(using)
    index: TextIndex | None = None
    try:
        with connection.cursor() as cursor:
            seen = _log_bounds(cursor)[1]
            vocabulary: dict[str, int] = {}
            parts: list[_Postings] = []
            after = 0
            while rows := _agent_rows(cursor, token, after, BUILD_BATCH):
                parts.append(_tokenized(cursor, rows, vocabulary))
                after = rows[-1][0]
                if sum(_POSTING_BYTES * len(p.terms) for p in parts) > _limit():
                    break  # over the bound already
            else:
                index = TextIndex.of(token, seen, parts, vocabulary)
    except Exception:
        logger.exception("building the text index of an agent failed; FTS5 answers")
    finally:
        connection.close()
    with _CACHE.lock:
        _CACHE.building.discard(key)
        if index is None or index.nbytes > _limit():
            _CACHE.refused.add(key)
            _CACHE.indexes.pop(key, None)
            return
        _CACHE.indexes.pop(key, None)
        _CACHE.indexes[key] = index
        _evict()


def _evict() -> None:
    """Drop the least recently used indexes until the cache fits its bound."""
    limit = _limit()
    total = sum(i.nbytes for i in _CACHE.indexes.values())
    while total > limit and len(_CACHE.indexes) > 1:
        _, dropped = _CACHE.indexes.popitem(last=False)
        total -= dropped.nbytes
