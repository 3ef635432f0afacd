"""How a recalled message reads in the prompt: what the person said whole, a long reply compactly.

What the person said (user turns) is what memory is for; the agent's replies support it and
run to hundreds of words of advice that match many of a question's words. A reply (any
message not the user's) longer than REPLY_TOKENS is shown compactly, within that cap: its
opening, verbatim (the first sentence when it has 20 to 160 characters, else the first 80
characters), then the sentences that say most of the query's terms, in the reply's order,
"…" where sentences were left out, and its id ("[#123]"), so that the whole text is one call
away. A reply that fits is shown whole: LoCoMo's second speaker, stored as the assistant, is
a person whose turns are under the cap. The person's own messages are shown whole up to
MESSAGE_TOKENS (a pasted document is cut).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from memory.dates import minute_label
from memory.index_schema import Term
from memory.models import MainMessage, Role
from memory.relevance import term_match
from memory.text import CJK_RUN, speaker
from memory.tokens import cut_mark, estimate_tokens, truncate_to_tokens

# A recalled message longer than this is shown cut, so one pasted document cannot take the
# whole recall budget.
MESSAGE_TOKENS = 300
# A reply's text is shown within this many tokens. LoCoMo's longest turn is 109 tokens and
# our Chinese set's 144: their replies stay whole; an agent's replies (150 to 600 words) do not.
REPLY_TOKENS = 150
# A trimmed reply's opening: its first sentence when it has this many characters (a
# "Great plan." says nothing), up to twice the opening's length; else its first characters.
OPENING_CHARS = 80
SENTENCE_MIN_CHARS = 20
GAP = "…"

# A reply is read in lines (a list's items, a paragraph); a line longer than this, in sentences.
LINE_CHARS = 200
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_FIRST_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")


def message_ref(message_id: int) -> str:
    """How a line shown cut names its message, whole at `GET /messages/{id}`. (On every line,
    ids cost LoCoMo's context 0.004 of its evidence at window 4096: a line that is the whole
    text goes without.)"""
    return f"[#{message_id}]"


def recalled_line(
    message: MainMessage, terms: Sequence[Term], reply_tokens: int = REPLY_TOKENS
) -> str:
    """How a recalled message reads in the prompt: "- [8 May 2023 13:56] Caroline: text"; the
    person's words over MESSAGE_TOKENS cut, "- [8 May 2023 13:56] [#123] Caroline: text...
    [truncated]" (the mark in the text's language), and a reply over `reply_tokens`
    compactly, "- [2 Feb 2026 20:30] [#124] assistant: opening … lines …"."""
    when = f"- [{minute_label(message.timestamp)}]"
    who = speaker(message.role, message.metadata)
    content = message.content
    if shown_whole(message, reply_tokens):
        text, cut = content, False  # the cut mark's language need not be read
    elif message.role == Role.USER:
        text, cut = truncate_to_tokens(content, MESSAGE_TOKENS, mark=cut_mark(content))
    else:
        text, cut = compact(content, terms, reply_tokens), True
    return f"{when} {message_ref(message.pk)} {who}: {text}" if cut else f"{when} {who}: {text}"


def shown_whole(message: MainMessage, reply_tokens: int = REPLY_TOKENS) -> bool:
    """Whether `recalled_line` shows the message's whole text: the person's words up to
    MESSAGE_TOKENS, another's up to `reply_tokens`."""
    if message.role == Role.USER:
        return estimate_tokens(message.content) <= MESSAGE_TOKENS
    return message.token_count <= reply_tokens


def sentences(text: str) -> list[str]:
    """What a reply is read in: its lines, a long line in its sentences, each with its
    whitespace collapsed."""
    pieces: list[str] = []
    for line in text.splitlines():
        flat = " ".join(line.split())
        short = len(flat) <= LINE_CHARS
        pieces += [flat] if short else [" ".join(s.split()) for s in _SENTENCE_BREAK.split(line)]
    return [piece for piece in pieces if piece]


def first_sentence(text: str) -> str:
    """The text's first sentence, its whitespace collapsed: up to the first . ! ? before a
    space, or Chinese end mark (as eval_locomo finds a turn by it)."""
    flat = " ".join(text.split())
    end = _FIRST_SENTENCE_END.search(flat)
    return flat[: end.end()] if end else flat


def opening(text: str, limit: int) -> str:
    """The start of the text, verbatim with its whitespace collapsed, as a cut reply keeps it:
    its first sentence (20 to 160 characters), else its first 80 characters to the end of the
    word there; cut further only when even that is over `limit` tokens."""
    flat = " ".join(text.split())
    first = first_sentence(text)
    if SENTENCE_MIN_CHARS <= len(first) <= 2 * OPENING_CHARS and _fits(first, limit):
        return first
    start = flat[:OPENING_CHARS]
    if not CJK_RUN.match(flat[OPENING_CHARS - 1 : OPENING_CHARS + 1] or " "):
        word = re.match(r"[^\W_]*", flat[OPENING_CHARS:])
        start += word.group() if word else ""
    while start and not _fits(start, limit):
        start = start[:-1]
    return start


def compact(text: str, terms: Sequence[Term], limit: int) -> str:
    """The text in at most `limit` tokens: its opening, then the sentences that say most of
    the query's terms (earlier first among equals) while they fit, in the text's order, "…"
    where text was left out. Nothing matches: the opening alone."""
    flat, spans = _read(text)
    shown = [(0, len(opening(text, limit)))]
    # Sentences not wholly in the opening, by how many of the query's terms they say.
    said = {
        span: count for span, count in _said(text, tuple(terms)).items() if span[1] > shown[0][1]
    }
    for span in sorted(said, key=lambda span: (-said[span], span)):
        if not said[span]:
            break
        # A heading ("**Useful extras**", "第一口吃什么：") goes with what it heads.
        heads = [span, spans[spans.index(span) + 1]] if _heading(flat, span, spans) else [span]
        for length in range(len(heads), 0, -1):
            if _fits(_joined(flat, [*shown, *heads[:length]]), limit):
                shown += heads[:length]
                break
    return _joined(flat, shown)


def clear_cache() -> None:
    """Drop the replies kept for the next call (after a forget request)."""
    _read.cache_clear()
    _said.cache_clear()


@lru_cache(maxsize=256)
def _read(text: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The text with its whitespace collapsed, and each sentence's place in it; kept for the
    next call: a reply is rendered at two lengths, and recalled again by later questions."""
    flat = " ".join(text.split())
    spans: list[tuple[int, int]] = []
    for sentence in sentences(text):
        at = flat.index(sentence, spans[-1][1] if spans else 0)
        spans.append((at, at + len(sentence)))
    return flat, tuple(spans)


@lru_cache(maxsize=256)
def _said(text: str, terms: tuple[Term, ...]) -> dict[tuple[int, int], int]:
    """How many of the query's terms each sentence says; kept for the reply's other length.
    Callers must not change the dict."""
    flat, spans = _read(text)
    lower = flat.lower()
    probes = [(term, term.text[:3]) for term in terms if term.kind != "day"]
    probes = [(term, probe) for term, probe in probes if probe in lower]
    return {span: _terms_said(probes, lower[slice(*span)], flat[slice(*span)]) for span in spans}


def _heading(flat: str, span: tuple[int, int], spans: tuple[tuple[int, int], ...]) -> bool:
    text = flat[slice(*span)]
    marked = text.endswith((":", "：", "**")) or text.startswith("#")
    return marked and span != spans[-1]


def _joined(flat: str, spans: list[tuple[int, int]]) -> str:
    """The spans of `flat` in its order, those next to each other as one; "…" at each gap
    and at the end when the text goes on."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and not flat[merged[-1][1] : start].strip():
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    text = f" {GAP} ".join(flat[start:end] for start, end in merged)
    return text if merged[-1][1] >= len(flat) else f"{text} {GAP}"


def _terms_said(probes: list[tuple[Term, str]], lower: str, sentence: str) -> int:
    """How many of the query's terms a sentence says (term_match), asked only of the terms it
    could say: a word's first three letters (every stem term_match accepts starts with them)
    or a bigram, in the sentence (`lower`); a day is said by a message's label, never here."""
    terms = [term for term, probe in probes if probe in lower]
    if not terms:
        return 0
    match = term_match(terms, sentence)
    return match.words_matched + match.bigrams_matched


def _fits(text: str, limit: int) -> bool:
    # With the gap mark that may follow it.
    return estimate_tokens(f"{text} {GAP}") <= limit


def is_support(message: MainMessage) -> bool:
    """Whether recall shows the message as support: a reply too long to show whole."""
    return message.role != Role.USER and message.token_count > REPLY_TOKENS
