"""bench.text_index, the in-process BM25 index the text benchmark measures: FTS5's ranking."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection

from bench.text_index import TextIndex
from memory import index
from memory.index import MESSAGE_TEXT
from memory.index_schema import query_terms
from memory.models import MainMessage

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_only]

WORDS = ["kiln", "pottery", "glaze", "clay", "wheel", "firing", "ash", "slip", "bowls"]


def fts5(query: str, k: int, exclude: list[int]) -> list[tuple[int, float]]:
    hits = index.lexical_search(MESSAGE_TEXT, agent_id="a1", query=query, k=k, exclude=exclude)
    return [(hit.id, hit.score) for hit in hits]


def test_it_ranks_and_scores_as_fts5_with_the_columns_weights_and_the_stems():
    sessions = itertools.count()
    messages = []
    for n in range(80):  # each word in a share of the rows, some twice, in threes per session
        words = [word for i, word in enumerate(WORDS) if n % (i + 2) == 0] * (1 + n % 3)
        messages.append(
            MainMessage.objects.create(
                agent_id="a1",
                session_id=f"s{next(sessions) // 3}",  # the two before are a reply's context
                role="user",
                content=" ".join(words) + f" note {n}",
            )
        )
    connection.ensure_connection()
    text = TextIndex(connection.connection)
    assert len(text.rowids) == len(messages)
    # "bowl" and "fired" meet "bowls" and "firing" through the porter stems.
    for query in ("kiln pottery glaze", "clay wheel ash slip", "bowl fired kiln", "glaze"):
        for k, exclude in ((5, []), (20, [messages[0].pk, messages[6].pk])):
            found = text.search(query_terms(query), exclude, k)
            expected = fts5(query, k, exclude)
            assert [row for row, _ in found] == [row for row, _ in expected], query
            assert [score for _, score in found] == pytest.approx(
                [score for _, score in expected], rel=1e-9
            )
