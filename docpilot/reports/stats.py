"""The paired tests behind ``docpilot compare``, in numpy and exact integer arithmetic.

Two tests, each written so that its p-value is the one scipy.stats gives for the same
call (a test holds them to scipy's results), without scipy in the install:

- ``binomial_two_sided``: the exact two-sided binomial test at ½, the exact McNemar test.
- ``signed_rank``: the Wilcoxon signed-rank test on non-zero paired differences, with
  the exact null distribution (every sign assignment, counted by dynamic programming
  over the ranks), or the normal approximation with the tie correction.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

import numpy as np

SignedRankMethod = Literal["exact", "asymptotic"]


def binomial_two_sided(successes: int, trials: int) -> float:
    """Two-sided p of ``successes`` in ``trials`` under Binomial(trials, ½).

        p = min(1, 2 · P(X ≤ min(k, n − k))),  X ~ Binomial(n, ½)

    At ½ the distribution is symmetric, so this equals scipy's ``binomtest`` p (the
    outcomes no likelier than the one seen, on both sides). Counted in integers, so the
    result is the exact value correctly rounded, however far out in the tail.
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, {trials}], not {successes}")
    low = min(successes, trials - successes)
    if 2 * low >= trials:
        return 1.0
    term, tail = 1, 1  # C(n, 0)
    for i in range(1, low + 1):
        term = term * (trials - i + 1) // i
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**trials)))


def average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks 1..n of ``values`` (tied values share their mean rank), and the size of each tie group."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.concatenate((starts, [values.size])))
    # A group holding positions s+1 .. s+size (1-based) takes their mean, s + (size + 1) / 2.
    group_rank = starts + (sizes + 1) / 2.0
    ranks = np.empty(values.size, dtype=float)
    ranks[order] = np.repeat(group_rank, sizes)
    return ranks, sizes


def signed_rank(diffs: np.ndarray, method: SignedRankMethod) -> tuple[float, float]:
    """Wilcoxon signed-rank test of non-zero differences: (statistic, two-sided p).

        ranks r_i of |d_i| (ties share their mean rank),  T⁺ = Σ_{d_i > 0} r_i,  T⁻ = Σ_{d_i < 0} r_i
        statistic = min(T⁺, T⁻)

    ``exact``: T⁺ under every one of the 2ⁿ sign assignments, equally likely,
    p = min(1, 2 · min(P(T ≤ T⁺), P(T ≥ T⁺))); with ties this is the full
    permutation test. ``asymptotic``: z = (T⁺ − n(n+1)/4) / σ with
    σ² = (n(n+1)(2n+1) − Σ(t³ − t)/2) / 24 over tie groups of size t, and
    p = erfc(|z| / √2). Like scipy's default (``correction=False``), z carries the tie
    correction but no continuity correction, so p-values stay those scipy reports.
    """
    diffs = np.asarray(diffs, dtype=float)
    if diffs.size == 0 or np.any(diffs == 0):
        raise ValueError("signed_rank takes the non-zero differences only, at least one")
    ranks, sizes = average_ranks(np.abs(diffs))
    plus = float(ranks[diffs > 0].sum())
    minus = float(ranks[diffs < 0].sum())
    statistic = min(plus, minus)
    if method == "exact":
        return statistic, _exact_p(ranks, plus)
    n = diffs.size
    mean = n * (n + 1) / 4.0
    spread = math.sqrt((n * (n + 1) * (2 * n + 1) - float(np.sum(sizes**3 - sizes)) / 2) / 24)
    z = (plus - mean) / spread
    return statistic, min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def _exact_p(ranks: np.ndarray, plus: float) -> float:
    # Ranks are whole or half numbers: doubled, they are integers, and the number of
    # sign assignments giving each doubled T⁺ is counted exactly by adding one rank at a time.
    doubled = np.rint(ranks * 2).astype(np.int64)
    counts = [1] + [0] * int(doubled.sum())
    reach = 0
    for rank in doubled.tolist():
        for total in range(reach, -1, -1):
            if counts[total]:
                counts[total + rank] += counts[total]
        reach += rank
    seen = round(plus * 2)
    at_most = sum(counts[: seen + 1])
    at_least = sum(counts[seen:])
    return float(min(Fraction(1), Fraction(2 * min(at_most, at_least), 2 ** ranks.size)))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down correction of ``p_values`` for testing them all at once, in the order given.

    With the m p-values sorted ascending, p(1) ≤ … ≤ p(m):

        p̃(i) = min(1, max over j ≤ i of (m − j + 1) · p(j))

    A test is significant at family-wise level α when p̃ < α: the chance that any of the
    m tests calls a difference that is not there stays below α, without assuming the
    tests are independent. Equal to statsmodels' ``multipletests(method="holm")``.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    corrected = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        corrected[index] = running
    return corrected
