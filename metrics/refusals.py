"""Refusal metrics: were the right questions refused, for the right reason, and no others.

The per-record functions return 1 or 0; their mean over the population named in the
registry is the rate. Over-refusal rates also carry an upper confidence bound,
because a small golden set cannot support a rate as precise as its mean suggests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from docpilot.schema import Row

# Written out rather than computed: scipy would cost the CLI its import time, and
# statistics.NormalDist().inv_cdf(0.95) is three units in the last place off.
Z_ONE_SIDED_95 = 1.6448536269514722
"""Φ⁻¹(0.95), the double nearest the exact normal quantile: the z of a one-sided 95 % bound.

The rounded 1.6449 moves the bound in its sixth digit; with this z the bound is the
upper end of statsmodels' two-sided Wilson interval at alpha 0.10 (a test holds the
constant to ``scipy.stats.norm.ppf(0.95)``).
"""


def negative_caught(row: Row) -> float:
    """1 when a negative's turn ended in a refusal, whatever its cause or whoever refused."""
    return float(row.refused)


def refused_by_gate(row: Row) -> float:
    """1 when the retrieval gate refused the turn before any model ran."""
    return float(row.refused and row.refused_by == "gate")


def refused_by_model(row: Row) -> float:
    """1 when the model itself refused."""
    return float(row.refused and row.refused_by == "model")


def cause_correct(row: Row) -> float:
    """1 when a refusal named the record's expected cause.

    A record without an expected cause (a positive) has no right cause, so its
    refusal counts as wrong.
    """
    return float(row.expected_cause is not None and row.refusal_cause == row.expected_cause)


def wilson_upper(successes: int, n: int, z: float = Z_ONE_SIDED_95) -> float:
    """Upper end of the Wilson score interval for a proportion ``successes / n``.

        p̂ = successes / n
        upper = (p̂ + z²/(2n) + z · √(p̂(1 − p̂)/n + z²/(4n²))) / (1 + z²/n)

    With ``z = Φ⁻¹(0.95)`` (the default) this is the one-sided 95 % upper bound. Unlike the normal
    approximation it stays inside [0, 1] and is informative at p̂ = 0 (with 30
    records and no refusal it is about 0.083, not 0).
    """
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return min(1.0, (centre + margin) / (1 + z2 / n))


def wilson_upper95(values: Sequence[float]) -> float | None:
    """One-sided 95 % Wilson upper bound of the share of 1s in 0/1 ``values``; None if empty."""
    if not values:
        return None
    return wilson_upper(round(sum(values)), len(values))
