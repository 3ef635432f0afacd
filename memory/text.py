"""Text analysis in any language: what the lexical index stores, and comparing texts.

The index's terms. FTS5's built-in tokenizers cannot match a two-character Chinese word:
`unicode61` keeps a whole run of CJK characters as one token and `trigram` ignores queries
shorter than three characters. So the index stores the text without its CJK runs
(`without_cjk`, which unicode61 splits into words; left in, a run glues itself to adjacent
Latin letters: "用Django和" would be one token) and the characters and overlapping bigrams of
each CJK run (`cjk_terms`, as Lucene's CJK analyzer does with unigrams on). A two-character
query is then one token. The SQLite triggers call these as SQL functions (memory.index
registers them on every connection); a message is indexed with `message_label`.

Comparing texts: folding and bigram similarity, for dedup decisions.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from functools import lru_cache
from typing import Any

from memory.dates import day_label

# Han (with extension A, compatibility ideographs and the supplementary planes), kana and Hangul.
CJK_RUN = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+"
)
# A text is mostly CJK when this share of its letters are CJK characters.
CJK_SHARE = 0.3
# Two texts say the same above this bigram similarity (`text_similarity`): the consolidation's
# dedup of memories, the context's memories a message already says, the evaluation's duplicates.
# Vectors use their model's own threshold (embeddings.Thresholds.duplicate).
DUPLICATE_TEXT_SIMILARITY = 0.8


def mostly_cjk(text: str) -> bool:
    """Whether a text is Chinese, Japanese or Korean more than anything else: what an
    English-only embedding model cannot read."""
    if text.isascii():  # no CJK character: known without reading the text (most texts)
        return False
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    letters = sum(map(str.isalpha, text))
    return bool(letters) and cjk / letters >= CJK_SHARE


def without_cjk(text: str | None) -> str:
    """The text with every CJK run replaced by a space."""
    return CJK_RUN.sub(" ", text) if text else ""


def cjk_terms(text: str | None, *, unigrams: bool = True) -> str:
    """Space-separated CJK terms: overlapping bigrams of every run, and its single characters.

    The index stores both, so a one-character query finds its character anywhere; a query uses
    only the bigrams of a longer run (`unigrams=False`), which rank what a word means.
    """
    if not text:
        return ""
    terms: list[str] = []
    for run in CJK_RUN.findall(text):
        if unigrams or len(run) == 1:
            terms.extend(run)
        terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    return " ".join(terms)


# What a query's terms are made of (index_schema.query_terms): letters and digits of any script.
# FTS5's unicode61 and PostgreSQL's parser split words at everything else (punctuation,
# symbols, emoji, "_", spaces), and a query's FTS syntax is quoted away (index_sqlite).
_TERM_CHARACTER = re.compile(r"[^\W_]")


def has_terms(query: str) -> bool:
    """Whether the lexical index can match anything of the query: a letter or a digit (a
    CJK character is a letter). `*`, `"`, `-` or an emoji alone has none."""
    return _TERM_CHARACTER.search(query) is not None


def fts_terms(text: str | None) -> str:
    """Words and CJK terms of a text in one string, for the `ctx` column."""
    return f"{without_cjk(text)} {cjk_terms(text)}"


def speaker(role: str, metadata: str | dict[str, Any] | None) -> str:
    """Who said it: metadata's "speaker" or "name" (OpenAI's field) when given, else the role."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            metadata = None
    if isinstance(metadata, dict):
        for key in ("speaker", "name"):
            if isinstance(metadata.get(key), str) and metadata[key].strip():
                return metadata[key].strip()
    return role


def _date(timestamp: str | datetime | None) -> datetime | None:
    if isinstance(timestamp, datetime):
        return timestamp
    try:
        return datetime.fromisoformat(timestamp) if timestamp else None
    except ValueError:
        return None


def message_label(
    timestamp: str | datetime | None, role: str, metadata: str | dict[str, Any] | None
) -> str:
    """'8 May 2023 Caroline: ' - indexed with a message, as questions name dates and people."""
    when = _date(timestamp)
    day = f"{day_label(when)} " if when else ""
    return f"{day}{speaker(role, metadata)}: "


def folded(text: str) -> str:
    """Lower case with every non-word character removed: what two texts share in wording."""
    return re.sub(r"[\W_]+", "", text.lower())


def _dice(a: str, b: str) -> float:
    """Dice coefficient of the character bigrams of two folded texts, counted as a multiset
    intersection: linear in the texts' length."""
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    # The multiset intersection counted without building it, over the smaller text's bigrams
    # (Counter's `&` took half as long again).
    ours, theirs = sorted((_bigrams(a), _bigrams(b)), key=len)
    shared = sum(min(count, theirs[bigram]) for bigram, count in ours.items() if bigram in theirs)
    return 2 * shared / (len(a) - 1 + len(b) - 1)


@lru_cache(maxsize=4096)
def _bigrams(folded_text: str) -> Counter[str]:
    """A folded text's bigrams, kept for the next comparison: the context compares its
    long-term memories with every recalled message, and the same messages come back call after
    call. Callers must not change the Counter."""
    return Counter(folded_text[i : i + 2] for i in range(len(folded_text) - 1))


def clear_cache() -> None:
    """Drop the texts kept for the next comparison (after a forget request)."""
    _bigrams.cache_clear()


def text_similarity(a: str, b: str) -> float:
    """Dice coefficient of character bigrams: language-neutral, 1.0 for the same text."""
    return _dice(folded(a), folded(b))


def folded_say_the_same(a: str, b: str, *, threshold: float = DUPLICATE_TEXT_SIMILARITY) -> bool:
    """Whether one folded text (`folded`) contains the other, or they are more than
    `threshold` similar; callers compare many pairs, so each text is folded once.

    Texts whose lengths differ too much cannot pass the threshold (Dice is at most
    2 * shorter / (shorter + longer)): they are told apart without counting bigrams, which
    keeps comparing a context's items cheap.
    """
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    shorter, longer = sorted((len(a), len(b)))
    return 2 * shorter / (shorter + longer) > threshold and _dice(a, b) > threshold


def highlight_terms(query: str) -> list[str]:
    """What to mark in a hit for a query: its words (of 2+ characters) and the bigrams of its
    CJK runs (a single character when a run is one), as the lexical index matches them."""
    words = [w for w in re.findall(r"\w+", without_cjk(query)) if len(w) > 1]
    return [*words, *cjk_terms(query, unigrams=False).split()]


def snippet(text: str, terms: list[str], *, width: int = 240) -> list[tuple[str, bool]]:
    """`width` characters of `text` around its first match of `terms` (case-insensitive), as
    (part, is a match) pairs, "…" where it was cut: the caller escapes each part."""
    pattern = (
        re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.I)
        if terms
        else None
    )
    first = pattern.search(text) if pattern else None
    start = max(0, first.start() - width // 3) if first else 0
    end = min(len(text), start + width)
    parts: list[tuple[str, bool]] = [("…", False)] if start else []
    position = start
    for match in pattern.finditer(text, start, end) if pattern else ():
        if match.start() > position:
            parts.append((text[position : match.start()], False))
        parts.append((match.group(), True))
        position = match.end()
    if position < end:
        parts.append((text[position:end], False))
    if end < len(text):
        parts.append(("…", False))
    return parts


# An amount of money: "$50", "300 dollars", "£1,200", 三百块, 六千五 (thousands and a digit).
MONEY = (
    r"[$£€¥]\s?\d|\d[\d,.]*\s?(k|dollars|pounds|euros|bucks|quid|yuan|rmb)\b"
    r"|[\d零一二两三四五六七八九十百千万]+\s?(块|元|刀|美元|英镑|欧元)|[一二两三四五六七八九十\d]+(千|万)[一二三四五六七八九]?"
    r"|\d+\s?(左右|以内|以下)"
)


# What `extraction.memory_text` puts before a statement: the day ("[8 May 2023] ") and the
# speaker ("Caroline: ").
_LABELS = re.compile(r"^\s*(\[[^\]\n]{1,40}\]\s*)?([^\s:：\[][^:：\n]{0,39}:\s+)?")


def statement_of(text: str) -> str:
    """A memory's statement without the labels `extraction.memory_text` put before it: what
    it says, for comparing it with another memory (its day and speaker are not the fact)."""
    return _LABELS.sub("", text, count=1)
