"""Test doubles. Never used by the product."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from memory.embeddings import DEFAULT_THRESHOLDS, EmbeddingError, Signature


class FakeEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close, others orthogonal.

    `fail_times` makes the next N calls raise EmbeddingError (a provider outage).
    """

    def __init__(
        self,
        dimension: int = 64,
        *,
        name: str = "fake",
        model: str = "hashed-words",
        fail_times: int = 0,
    ) -> None:
        self.signature = Signature(name, model, dimension)
        self.thresholds = DEFAULT_THRESHOLDS
        self.batch_size = 5
        self.fail_times = fail_times
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail_times:
            self.fail_times -= 1
            raise EmbeddingError("fake provider is down")
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.signature.dimension
        for word in re.findall(r"\w+", text.lower()):
            slot = int(hashlib.md5(word.encode()).hexdigest(), 16) % self.signature.dimension
            vector[slot] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (len(vector) - 1)
