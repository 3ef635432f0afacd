"""recall@10 of the derived index's HNSW graph (usearch) by how it is built, on clustered vectors.

    .venv/bin/python -m bench.hnsw_build [--rows 1000000] [--builds 16,64 16,256 32,128]

Builds a graph of `--rows` vectors of bench.vectors' clustered distribution (`bench_context`'s:
1,000 centres, so clusters of 1,000 near ties at 1M rows) for each `links,depth` pair
(usearch's connectivity and expansion_add), on two threads, and asks it 50 new queries of the
same distribution as memory.index_ann asks it (k + EXTRA_CANDIDATES, the best 10 rescored) at
several search depths. Prints the build's seconds and memory, and per search depth the
recall@10 against the exact nearest (numpy, float32) and the median query time. The vectors
are held in memory: 4 GB at 1M x 1,024, and the exact scores of the queries 200 MB more.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from usearch.index import Index

from bench.vectors import clustered_vectors
from memory.index_ann import EXTRA_CANDIDATES

DIMENSION = 1024
QUERIES = 50
K = 10
SEARCH_DEPTHS = (128, 256, 512, 1024, 2048)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--builds", nargs="+", default=["16,64", "16,256", "32,128"])
    options = parser.parse_args()
    vectors = clustered_vectors(np.random.default_rng(7), options.rows, DIMENSION)
    queries = clustered_vectors(np.random.default_rng(99), QUERIES, DIMENSION)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :K]
    for build in options.builds:
        links, depth = (int(part) for part in build.split(","))
        graph = Index(
            ndim=DIMENSION, metric="ip", dtype="f16", connectivity=links, expansion_add=depth
        )
        start = time.perf_counter()
        graph.add(np.arange(options.rows, dtype=np.int64), vectors, threads=2)
        seconds = time.perf_counter() - start
        mib = graph.memory_usage / 2**20
        print(f"{links} links, built {depth} deep: {seconds:.0f} s on 2 threads, {mib:,.0f} MiB")
        for search in SEARCH_DEPTHS:
            graph.expansion_search = search
            print(f"  searched {search} deep: " + _recall(graph, vectors, queries, exact))


def _recall(graph: Index, vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray) -> str:
    """Each query answered as index_ann asks the graph: the best K of K + EXTRA_CANDIDATES."""
    found, seconds = 0, []
    for query, nearest in zip(queries, exact, strict=True):
        start = time.perf_counter()
        candidates = graph.search(query, K + EXTRA_CANDIDATES, threads=1).keys
        best = candidates[np.argsort(-(vectors[candidates] @ query))[:K]]
        seconds.append(time.perf_counter() - start)
        found += len(set(best.tolist()) & set(nearest.tolist()))
    recall = found / (K * len(queries))
    return f"recall@{K} {recall:.3f}, p50 {statistics.median(seconds) * 1000:.2f} ms"


if __name__ == "__main__":
    main()
