"""A metric's values across runs as one line of block characters, for the terminal and Markdown."""

from __future__ import annotations

import math
from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"
"""The eight heights, lowest first."""

GAP = "·"
"""A run with no value for the metric (null: nothing to average over)."""


def sparkline(values: Sequence[float | int | None]) -> str:
    """One character per value, scaled from the lowest to the highest value shown.

    A flat series sits at the middle height, so "no change" is never read as "at the
    bottom"; a null value is ``GAP``.
    """
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not known:
        return GAP * len(values)
    low, high = min(known), max(known)
    line = []
    for value in values:
        if value is None or not math.isfinite(value):
            line.append(GAP)
        elif high - low <= 1e-12:
            line.append(BLOCKS[len(BLOCKS) // 2 - 1])
        else:
            line.append(BLOCKS[min(int((float(value) - low) / (high - low) * len(BLOCKS)), len(BLOCKS) - 1)])
    return "".join(line)
