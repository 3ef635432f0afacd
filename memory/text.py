"""Comparing texts in any language: folding and bigram similarity, for dedup decisions."""

from __future__ import annotations

import re
from collections import Counter


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
    grams_a = Counter(a[i : i + 2] for i in range(len(a) - 1))
    grams_b = Counter(b[i : i + 2] for i in range(len(b) - 1))
    shared = sum((grams_a & grams_b).values())
    return 2 * shared / (len(a) - 1 + len(b) - 1)


def text_similarity(a: str, b: str) -> float:
    """Dice coefficient of character bigrams: language-neutral, 1.0 for the same text."""
    return _dice(folded(a), folded(b))


def says_the_same(a: str, b: str, *, threshold: float = 0.8) -> bool:
    """Whether one text contains the other, or they are more than `threshold` similar."""
    return folded_say_the_same(folded(a), folded(b), threshold=threshold)


def folded_say_the_same(a: str, b: str, *, threshold: float = 0.8) -> bool:
    """`says_the_same` for texts already folded (a caller comparing many pairs folds once).

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
