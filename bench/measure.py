"""Latency summaries shared by the benchmark, load-test and evaluation commands."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(samples: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: a value that was measured, never an interpolation."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def median_and_range(values: Sequence[float], digits: int = 2) -> str:
    """A figure repeated over several runs: the median, then the lowest and highest run."""
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:,.{digits}f}"
    return f"{median:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"
