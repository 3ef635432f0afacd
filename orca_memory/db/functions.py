"""SQL functions registered on every connection, used by the FTS5 triggers.

FTS5's built-in tokenizers cannot match a two-character Chinese word: `unicode61` keeps a whole
run of CJK characters as one token and `trigram` ignores queries shorter than three characters.
So the triggers store the text in two columns (plus, for messages, a third with the messages
before it, see memory.index): the text without its CJK runs
(`orca_fts_words()`, which unicode61 splits into words; left in, a run glues itself to adjacent
Latin letters: "用Django和" would be one token) and the characters and overlapping bigrams of
each CJK run (`orca_cjk_terms()`, as Lucene's CJK analyzer does with unigrams on). A
two-character query is then one token.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

# Han (with extension A, compatibility ideographs and the supplementary planes), kana and Hangul.
CJK_RUN = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]+"
)


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
    day = f"{when.day} {when:%B %Y} " if when else ""
    return f"{day}{speaker(role, metadata)}: "


def register(connection: Any) -> None:
    connection.create_function("orca_fts_words", 1, without_cjk, deterministic=True)
    connection.create_function("orca_cjk_terms", 1, cjk_terms, deterministic=True)
    connection.create_function("orca_fts_terms", 1, fts_terms, deterministic=True)
    connection.create_function("orca_message_label", 3, message_label, deterministic=True)
