"""A measurement, not the service's code: recall's text query answered by an in-process BM25
index of the messages' FTS5 table, against FTS5 itself.

    .venv/bin/python manage.py bench_text_index STORE.db [--queries 200]

FTS5's bm25() reads each query phrase's whole row list for its idf on every query (the
agent's scope token among them) and scores every row the expression matches: both grow with
the agent (docs/BENCHMARKS.md, "Recall's text query"). This index holds FTS5's own tokens
(read from `fts5vocab`, so the same porter stems), per term the rows holding it with their
count per column, and each row's length; it scores a query as FTS5's bm25() does (k1 1.2, b
0.75, idf floored at 1e-6, the columns weighted 1, 1, 0.5, 0, 0) with numpy, the rows of the
rarest terms first (`TextIndex.search`).

Not a service index: it reads the whole table once and answers for all of it (a store of one
agent), is never updated, and leaves out phrases of several tokens (the days). A service
version needs a change log of the text (the FTS5 table is written by triggers), a per-agent
build and the table's idf.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.index_schema import Term

# FTS5's columns of a message row, the weights recall's query gives them, and the columns
# each kind of term is matched in (index_sqlite._COLUMNS).
COLUMNS = {"body": 0, "cjk": 1, "ctx": 2, "agent_id": 3, "session_id": 4}
WEIGHTS = np.array([1.0, 1.0, 0.5, 0.0, 0.0])
KIND_COLUMNS = {"day": [0], "word": [0, 2], "bigram": [1, 2]}
K1, B = 1.2, 0.75
TOKENIZER = "porter unicode61 remove_diacritics 2"  # the FTS5 tables' (index_sqlite)
# Once the rows of the terms to look at are this share of the table, every row is scored.
DENSE_SHARE = 0.05


@dataclass(frozen=True)
class Contribution:
    """What one term adds to each row holding it: positions into the index's rows, scores."""

    rows: np.ndarray
    scores: np.ndarray


class TextIndex:
    """Every row of one FTS5 table, as posting lists of FTS5's tokens."""

    def __init__(self, connection: Any, table: str = "fts_main_messages") -> None:
        """Read the table's tokens through `connection` (a DB-API connection to the store)."""
        start = time.perf_counter()
        self.connection = connection
        term_ids, docs, columns = self._instances(table)
        self.read_seconds = time.perf_counter() - start
        self.instances = len(term_ids)
        self.rowids, positions = np.unique(docs, return_inverse=True)
        del docs
        rows = len(self.rowids)
        lengths = np.bincount(positions, minlength=rows).astype(np.float64)  # all columns
        # bm25's length part, per row: k1 * (1 - b + b * length / mean length)
        self.norm = K1 * (1 - B + B * lengths / lengths.mean())
        # One posting per (term, row, column), counting the term's tokens there.
        key = (term_ids.astype(np.int64) * rows + positions) * len(COLUMNS) + columns
        del term_ids, positions, columns
        key.sort()
        unique, counts = np.unique(key, return_counts=True)
        del key
        self.posting_rows = ((unique // len(COLUMNS)) % rows).astype(np.int32)
        self.posting_columns = (unique % len(COLUMNS)).astype(np.int8)
        self.posting_counts = counts.astype(np.int32)
        terms_of_postings = unique // (len(COLUMNS) * rows)
        self.starts = np.searchsorted(terms_of_postings, np.arange(len(self.terms) + 1))
        self.build_seconds = time.perf_counter() - start
        self.contributions: dict[Term, Contribution | None] = {}
        self.tokens: dict[str, list[str]] = {}
        connection.execute(
            f"CREATE VIRTUAL TABLE temp.query_text USING fts5(x, tokenize='{TOKENIZER}')"
        )
        connection.execute(
            "CREATE VIRTUAL TABLE temp.query_tokens USING fts5vocab(temp, query_text, instance)"
        )

    @property
    def nbytes(self) -> int:
        arrays = (self.posting_rows, self.posting_columns, self.posting_counts, self.norm)
        return sum(array.nbytes for array in arrays) + self.rowids.nbytes

    def _instances(self, table: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term id, rowid, column) of every token of the table, in fts5vocab's order."""
        execute = self.connection.execute
        execute(f"CREATE VIRTUAL TABLE temp.vocab_rows USING fts5vocab(main, {table}, row)")
        execute(f"CREATE VIRTUAL TABLE temp.vocab_tokens USING fts5vocab(main, {table}, instance)")
        names, counts = [], []
        for term, count in execute("SELECT term, cnt FROM temp.vocab_rows"):
            names.append(term)
            counts.append(count)
        self.terms = {term: number for number, term in enumerate(names)}
        term_ids = np.repeat(np.arange(len(names), dtype=np.int32), np.asarray(counts))
        case = " ".join(f"WHEN '{name}' THEN {number}" for name, number in COLUMNS.items())
        cursor = execute(f"SELECT doc * 8 + CASE col {case} END FROM temp.vocab_tokens")
        packed = np.empty(len(term_ids), np.int64)
        filled = 0
        while rows := cursor.fetchmany(1_000_000):
            packed[filled : filled + len(rows)] = np.fromiter((r for (r,) in rows), np.int64)
            filled += len(rows)
        assert filled == len(term_ids), "the vocabulary changed while it was read"
        return term_ids, packed >> 3, (packed & 7).astype(np.int8)

    def _fts_tokens(self, text: str) -> list[str]:
        """The text as FTS5's tokenizer reads it (a query phrase)."""
        execute = self.connection.execute
        execute("DELETE FROM temp.query_text")
        execute("INSERT INTO temp.query_text (rowid, x) VALUES (1, ?)", [text])
        return [token for (token,) in execute("SELECT term FROM temp.query_tokens ORDER BY offset")]

    def contribution(self, term: Term) -> Contribution | None:
        """The term's bm25 part in each row holding it in its columns; kept (the index does not
        change). None for a term no row holds, or a phrase of several tokens."""
        if term not in self.contributions:
            self.contributions[term] = self._contribution(term)
        return self.contributions[term]

    def _contribution(self, term: Term) -> Contribution | None:
        if term.text not in self.tokens:
            self.tokens[term.text] = self._fts_tokens(term.text)
        tokens = self.tokens[term.text]
        if len(tokens) != 1 or tokens[0] not in self.terms:
            return None
        number = self.terms[tokens[0]]
        span = slice(self.starts[number], self.starts[number + 1])
        rows, columns = self.posting_rows[span], self.posting_columns[span]
        counts = self.posting_counts[span]
        wanted = np.isin(columns, KIND_COLUMNS[term.kind])
        if not wanted.any():
            return None
        held, where = np.unique(rows[wanted], return_inverse=True)
        frequency = np.bincount(where, weights=WEIGHTS[columns[wanted]] * counts[wanted])
        total = len(self.rowids)
        idf = math.log((total - len(held) + 0.5) / (len(held) + 0.5))
        idf = idf if idf > 0 else 1e-6
        scores = idf * frequency * (K1 + 1) / (frequency + self.norm[held])
        return Contribution(held, scores)

    def search(
        self, terms: Sequence[Term], exclude: Collection[int], k: int
    ) -> list[tuple[int, float]]:
        """The k best (rowid, score) of the whole table, best first, as FTS5's bm25 ranks them
        (`terms` as the service queries them: index_sqlite.weighing_terms).

        Max-score pruning: the rows of the rarest terms are scored with every term first; a
        row holding none of them scores at most the other terms' largest parts added up, so
        once the k-th score found is above that sum, no other row can take a place. Else the
        next rarest term's rows join, until the sum is passed or every term's rows are in.
        """
        parts = [part for part in map(self.contribution, terms) if part is not None]
        rarest = sorted(range(len(parts)), key=lambda i: len(parts[i].rows))
        # bounds[n]: the most a row holding none of the n rarest terms can score
        maxima = [float(parts[i].scores.max()) for i in rarest]
        bounds = [sum(maxima[n:]) for n in range(len(parts) + 1)]
        excluded = np.asarray(sorted(exclude), dtype=np.int64)
        for gate in range(1, len(parts) + 1):
            if sum(len(parts[i].rows) for i in rarest[:gate]) > len(self.rowids) * DENSE_SHARE:
                return self._every_row(parts, excluded, k)
            rows = np.unique(np.concatenate([parts[i].rows for i in rarest[:gate]]))
            rows = rows[~np.isin(self.rowids[rows], excluded)]
            scores = np.zeros(len(rows))
            for part in parts:  # in the query's order, as FTS5 adds them
                scores += _looked_up(part, rows)
            best = _best(rows, scores, self.rowids, k)
            if gate == len(parts) or (len(best) == k and scores[best[-1]] > bounds[gate]):
                return [(int(self.rowids[rows[i]]), float(scores[i])) for i in best]
        return []

    def _every_row(
        self, parts: list[Contribution], excluded: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        """search's answer from a score for every row: cheaper once the rows to look at are
        a large share of the table."""
        scores = np.zeros(len(self.rowids))
        for part in parts:
            scores[part.rows] += part.scores
        at = np.minimum(np.searchsorted(self.rowids, excluded), len(self.rowids) - 1)
        scores[at[self.rowids[at] == excluded]] = 0
        rows = np.arange(len(self.rowids))
        return [
            (int(self.rowids[i]), float(scores[i])) for i in _best(rows, scores, self.rowids, k)
        ]


def _looked_up(part: Contribution, rows: np.ndarray) -> np.ndarray:
    """The part's score at each of these rows (sorted positions), 0 where it has none."""
    at = np.minimum(np.searchsorted(part.rows, rows), len(part.rows) - 1)
    return np.where(part.rows[at] == rows, part.scores[at], 0.0)


def _best(rows: np.ndarray, scores: np.ndarray, rowids: np.ndarray, k: int) -> np.ndarray:
    """Indexes into `rows` of the k best scores above 0, best first; ties in rowid order, as
    FTS5 returns them."""
    if k < len(scores):  # every row tied with the k-th is a candidate
        kth = -np.partition(-scores, k - 1)[k - 1]
        chosen = np.flatnonzero((scores >= kth) & (scores > 0))
    else:
        chosen = np.flatnonzero(scores > 0)
    return chosen[np.lexsort((rowids[rows[chosen]], -scores[chosen]))][:k]
