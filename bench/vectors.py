"""Synthetic embeddings for the benchmarks: unit vectors, uniform or in clusters."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

CLUSTERS = 1000
# Each vector is its cluster's centre plus noise of this norm (before normalising): a
# similarity of ~0.7 to the centre, closer to real embeddings than uniform random vectors,
# which are HNSW's worst case (every point nearly equidistant).
CLUSTER_NOISE = 1.0


def unit_vectors(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dimension), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def clustered_vectors(rng: np.random.Generator, n: int, dimension: int) -> np.ndarray:
    """A Gaussian mixture on the sphere: CLUSTERS centres, each vector near one of them."""
    centres = unit_vectors(np.random.default_rng(3), CLUSTERS, dimension)  # same for data/query
    noise = unit_vectors(rng, n, dimension) * CLUSTER_NOISE
    vectors = centres[rng.integers(0, CLUSTERS, n)] + noise
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "random": unit_vectors,
    "clustered": clustered_vectors,
}
