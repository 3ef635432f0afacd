"""Comparing texts in any language: folding and bigram similarity, for dedup decisions."""

from __future__ import annotations

import re
from collections import Counter


def folded(text: str) -> str:
    """Lower case with every non-word character removed: what two texts share in wording."""
    return re.sub(r"[\W_]+", "", text.lower())


def text_similarity(a: str, b: str) -> float:
    """Dice coefficient of character bigrams: language-neutral, 1.0 for the same text.

    Counts shared bigrams as a multiset intersection, linear in the texts' length.
    """
    a, b = folded(a), folded(b)
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    grams_a = Counter(a[i : i + 2] for i in range(len(a) - 1))
    grams_b = Counter(b[i : i + 2] for i in range(len(b) - 1))
    shared = sum((grams_a & grams_b).values())
    return 2 * shared / (len(a) - 1 + len(b) - 1)


def says_the_same(a: str, b: str, *, threshold: float = 0.8) -> bool:
    """Whether one text contains the other, or they are more than `threshold` similar.

    Texts whose lengths differ too much cannot pass the threshold (Dice is at most
    2 * shorter / (shorter + longer)): they are told apart without counting bigrams, which
    keeps comparing a context's items cheap.
    """
    fa, fb = folded(a), folded(b)
    if not fa or not fb:
        return False
    if fa in fb or fb in fa:
        return True
    shorter, longer = sorted((len(fa), len(fb)))
    return 2 * shorter / (shorter + longer) > threshold and text_similarity(a, b) > threshold
