"""Aggregations: how per-record values become one number for the run.

An aggregation over no values is ``None``: a metric with nothing to average over is
undefined, and reporting it as 0 would read as a real (and bad) result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean (summed with ``math.fsum``); None when there are no values."""
    if not values:
        return None
    return math.fsum(values) / len(values)


def total(values: Sequence[float]) -> int | None:
    """Sum of whole-number counts; None when there are no values."""
    if not values:
        return None
    return int(sum(values))
