"""Synthetic embeddings for the benchmarks: unit vectors, uniform or in clusters."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

CLUSTERS = 1000
# Each vector is its cluster's centre plus noise of this norm (before normalising): a
# similarity of ~0.7 to the centre, closer to real embeddings than uniform random vectors,
# which are HNSW's worst case (every point nearly equidistant).
CLUSTER_NOISE = 1.0


def unit_vectors(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dimension), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# Clustered vectors are made this many at a time: at 1M x 1024 the whole noise, centres and
# sum at once would take 12 GB instead of the result's 4.
CHUNK = 100_000


@cache
def _centres(dimension: int) -> np.ndarray:
    """The same for data and queries, made once: bench_context embeds a query at a time."""
    return unit_vectors(np.random.default_rng(3), CLUSTERS, dimension)


def clustered_vectors(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    """A Gaussian mixture on the sphere: CLUSTERS centres, each vector near one of them."""
    centres = _centres(dimension)
    vectors = np.empty((n, dimension), dtype=np.float32)
    for first in range(0, n, CHUNK):
        count = min(CHUNK, n - first)
        noise = unit_vectors(rng, count, dimension) * CLUSTER_NOISE
        chunk = centres[rng.integers(0, CLUSTERS, count)] + noise
        vectors[first : first + count] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    return vectors


DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "random": unit_vectors,
    "clustered": clustered_vectors,
}
