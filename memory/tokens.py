"""Token estimates: one rule, used when a row is written (`token_count`) and for budgets.

The design's rule of thumb is ~1.5 tokens per Chinese character. For everything else we use
the common BPE average of ~4 characters per token (English words, digits, punctuation and
spaces alike). Both are estimates: they stay within the model window's margin (the context
budget is 60% of it) without shipping a tokenizer per model.
"""

from __future__ import annotations

import math

from memory.text import CJK_RUN, mostly_cjk

CJK_TOKENS_PER_CHAR = 1.5
OTHER_CHARS_PER_TOKEN = 4
# The design's mark, ending a sub-agent's result cut as it is stored (subagents.runs).
TRUNCATION_MARK = "[内容已截断]"
# A text shown cut in a context (a recalled message) ends in the language of the text cut:
# English words inside an English context, Chinese ones inside a Chinese (`cut_mark`).
CUT_MARK = "... [truncated]"
CUT_MARK_CHINESE = "……[已截断]"


def _cjk_chars(text: str) -> int:
    if text.isascii():  # known without reading the text (most texts)
        return 0
    return sum(len(run) for run in CJK_RUN.findall(text))


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    cjk = _cjk_chars(text)
    return math.ceil(cjk * CJK_TOKENS_PER_CHAR + (len(text) - cjk) / OTHER_CHARS_PER_TOKEN)


def cut_mark(text: str) -> str:
    """The mark that ends `text` shown cut: Chinese when the text is mostly CJK
    (`memory.text.mostly_cjk`: Chinese, Japanese or Korean), English otherwise."""
    return CUT_MARK_CHINESE if mostly_cjk(text) else CUT_MARK


def truncate_to_tokens(text: str, limit: int, *, mark: str = TRUNCATION_MARK) -> tuple[str, bool]:
    """The text cut so that it and the appended `mark` fit in `limit` tokens.

    Returns (text, truncated); text within the limit comes back unchanged.
    """
    if estimate_tokens(text) <= limit:
        return text, False
    budget = limit - estimate_tokens(mark)
    # Binary search on the prefix length: the estimate grows with every character.
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + mark, True
