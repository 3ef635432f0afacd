"""What the indexes hold and how a query reads: shared by both engines' SQL.

`memory.index` is the interface the flows use; `index_sqlite` (FTS5, vec0) and `index_postgres`
(tsvector, pgvector) are the engines behind it. Both index the same rows of the same tables
with the same fields and weights, and read a query into the same `Term`s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from memory import dates
from memory.text import cjk_terms, without_cjk

# vec0 refuses larger k; PostgreSQL keeps the same bound, so an API answers alike on both.
KNN_MAX_K = 4096
# Bounds the cost of a long pasted query: every term is one more index lookup.
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class VectorTable:
    name: str
    key: str
    metadata: dict[str, str]  # filterable column -> its type ("text" or "integer")


@dataclass(frozen=True)
class LexicalTable:
    """A text index over `source`, scoped by `scopes`; each engine says how it fills it."""

    name: str
    source: str
    scopes: tuple[str, ...]
    filterable: tuple[str, ...] = ()  # columns of `source` a search may filter on
    dated: bool = False  # the indexed text begins with the row's date, as message_label writes it


MESSAGE_VECTORS = VectorTable(
    "vec_main_messages",
    "msg_id",
    {"session_id": "text", "role": "text", "msg_type": "text", "created_at": "integer"},
)
SUMMARY_VECTORS = VectorTable("vec_short_term_memories", "memory_id", {"session_id": "text"})
MEMORY_VECTORS = VectorTable("vec_long_term_memories", "memory_id", {"memory_type": "text"})
VECTOR_TABLES = (MESSAGE_VECTORS, SUMMARY_VECTORS, MEMORY_VECTORS)

# A message is indexed with its date and speaker ("8 May 2023 Caroline: ", memory.text's
# message_label) and - as its context - with the two messages before it in its session: an
# answer often shares no word with the question, but the turn it answers does: on LoCoMo
# the largest gain in recall (docs/EVALUATION.md, "What got there"). Context counts half.
CONTEXT_MESSAGES = 2
MESSAGE_TEXT = LexicalTable(
    "fts_main_messages",
    "main_messages",
    ("agent_id", "session_id"),
    filterable=("session_id", "role", "msg_type", "timestamp"),
    dated=True,
)
SUMMARY_TEXT = LexicalTable(
    "fts_short_term_memories", "short_term_memories", ("agent_id", "session_id")
)
MEMORY_TEXT = LexicalTable("fts_long_term_memories", "long_term_memories", ("agent_id",))
LEXICAL_TABLES = (MESSAGE_TEXT, SUMMARY_TEXT, MEMORY_TEXT)

# NLTK's English stop words (those \w+ can produce): dropped from queries, where they only
# add common matches. Measured on LoCoMo (docs/EVALUATION.md, "What got there").
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
# stop words do. Dropped from queries only. Measured on our Chinese set (docs/EVALUATION.md,
# "What the agent receives").
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


class VectorRow(NamedTuple):
    """One stored vector with its scope and metadata; the embedding as float32 values."""

    row_id: int
    agent_id: str
    metadata: dict[str, str | int]
    embedding: Sequence[float]


class Filter(NamedTuple):
    column: str
    op: str
    value: str | int | float


class VectorIndexStatus(NamedTuple):
    """Whether KNN can run on this database, and if not, a reason an operator can act on."""

    enabled: bool
    reason: str | None
    version: str | None = None  # of the engine's vector extension (sqlite-vec, pgvector)


class KnnPath(NamedTuple):
    """What answers KNN on this database, and why (health's `vector_search.knn`)."""

    path: Literal["memory_index", "vec0_scan", "pgvector"]
    reason: str


class Term(NamedTuple):
    """One term of a query: a day named (a phrase on the text's date label), a word (the text
    and its context) or a CJK bigram (the CJK terms of both)."""

    kind: Literal["day", "word", "bigram"]
    text: str


def _without(text: str, mentions: Sequence[dates.DayMention]) -> str:
    """The text with each mention replaced by a space."""
    for mention in reversed(mentions):
        text = f"{text[: mention.start]} {text[mention.end :]}"
    return text


def query_terms(query: str, *, now: datetime | None = None) -> list[Term]:
    """The query's days, words and CJK bigrams, each once, at most MAX_QUERY_TERMS.

    English stop words and Chinese function bigrams are dropped unless the query has nothing
    else. With `now`, each day the query names ("5月2号", "上周三", "May 2nd": memory.dates,
    relative days counted from `now`) is one term in place of the words that named it: "5",
    "2" or "may" alone would match any day. It weighs as one term: repeated to weigh more, it
    lost recall on LoCoMo questions asked with their day (docs/EVALUATION.md).
    """
    mentions = dates.find_day_mentions(query, now=now) if now is not None else []
    days = [Term("day", day.phrase) for day in dict.fromkeys(m.day for m in mentions)]
    rest = _without(query, mentions)
    words = re.findall(r"\w+", without_cjk(rest).lower())
    # A query of stop words and a day ("what did I do on May 2") is about the day.
    words = [w for w in words if w not in STOP_WORDS] or ([] if days else words)
    bigrams = cjk_terms(rest, unigrams=False).split()
    bigrams = [t for t in bigrams if t not in CJK_STOP_BIGRAMS] or bigrams
    terms = [*days, *(Term("word", w) for w in words), *(Term("bigram", b) for b in bigrams)]
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
