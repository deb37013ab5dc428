"""What a set can detect: the smallest change in an outcome that DocPilot's paired tests would call.

When ``compare`` or the variants' verdict says "no evidence", the question left is what
difference the records could have shown. The answer is the *detectable change*: the
smallest true change δ in an outcome's mean that the paired test calls significant at
α (two-sided) with probability at least 1 − β (the power), given the number of paired
records n and how much the records move between the runs. Defaults: α = 0.05, power 0.8.

0/1 outcomes (recall@8 of one gold entry, a refusal decided right, an attack blocked)
are tested by the exact McNemar test (``docpilot.reports.compare.mcnemar``). A pair is
discordant with probability ψ = p₀₁ + p₁₀ and the change in the rate is δ = p₀₁ − p₁₀.
The number of discordant pairs is D ~ Binomial(n, ψ), and given D = d the improved ones
C ~ Binomial(d, q) with q = (ψ + δ) / 2ψ. The test rejects when the two-sided binomial
p-value 2·P(Binomial(d, ½) ≥ max(c, d − c)) is below α, so the power is, exactly,

    power(n, ψ, δ) = Σ_d P(D = d) · [P(C ≥ u_d) + P(C ≤ d − u_d)]

with u_d the smallest count above d/2 that the test rejects (none for d ≤ 5 at α = 0.05).
A change can be no larger than the discordance (|δ| ≤ ψ), so the detectable change is

    δ* = min { δ ∈ (0, 1] : power(n, max(ψ̂, δ), δ) ≥ 1 − β }

with ψ̂ the discordance observed between the runs, or assumed before a first pair of
runs. It is worked out exactly for n ≤ ``EXACT_MAX`` records, and beyond by the normal
approximation (Connor 1987): n δ² = (z_{1−α/2} √ψ + z_{1−β} √(ψ − δ²))². The exact
test is discrete, so its power is not monotone in n by a hair; δ* still shrinks as the
set grows.

Continuous outcomes (answer F1, nDCG@8, MRR, and a 0/1 outcome read as a pass rate over
repeated samples) are tested by the Wilcoxon signed-rank test on the per-record
differences. With σ the standard deviation of those differences, the detectable shift
of their mean is the paired t-test's, widened by the Wilcoxon test's asymptotic
relative efficiency against it under normal differences, 3/π (Noether 1987):

    δ* = (z_{1−α/2} + z_{1−β}) · σ / √(n · 3/π)

an approximation for normal-like differences and tens of records or more.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from statistics import NormalDist

import numpy as np

ALPHA = 0.05
"""Two-sided significance level the tests call a change at."""

POWER = 0.8
"""Probability of calling a change of the detectable size."""

EXACT_MAX = 300
"""Most paired records the McNemar power is summed exactly for; beyond, the normal approximation."""

_STEPS = 24  # bisection steps: δ* to within 2⁻²⁴


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _log_factorials(n: int) -> np.ndarray:
    return np.array([math.lgamma(k + 1) for k in range(n + 1)])


@functools.cache
def _rejected_upper(d: int, alpha: float) -> int | None:
    """The smallest count above d/2 whose two-sided binomial p at ½ is below ``alpha``; None if there is none.

    The p-value is ``reports.stats.binomial_two_sided``'s, min(1, 2·P(X ≤ d − c)), counted in
    integers and compared as that function's float is, so the test and its power agree exactly.
    """
    tail, term, found = 0, 1, None
    for low in range(0, (d + 1) // 2):  # the lower count d − c, below d/2
        tail += term
        if float(Fraction(2 * tail, 2**d)) >= alpha:
            break
        found = d - low
        term = term * (d - low) // (low + 1)
    return found


def rejection_counts(n: int, alpha: float = ALPHA) -> list[int | None]:
    """For d = 0..n discordant pairs, the smallest count above d/2 the exact McNemar test rejects at ``alpha``.

    None where no split of d pairs is significant.
    """
    return [_rejected_upper(d, alpha) for d in range(n + 1)]


def mcnemar_power(n: int, discordance: float, change: float, *, alpha: float = ALPHA,
                  rejections: list[int | None] | None = None) -> float:
    """The exact power of the exact McNemar test (the module's formula) for n pairs, discordance ψ and change δ.

    ``rejections`` are ``rejection_counts(n, alpha)``, when worked out already.
    """
    if not 0 <= abs(change) <= discordance <= 1:
        raise ValueError(f"a change of {change} needs a discordance of at least its size, not {discordance}")
    if n == 0 or discordance == 0:
        return 0.0
    rejections = rejections if rejections is not None else rejection_counts(n, alpha)
    log_fact = _log_factorials(n)
    q = (discordance + change) / (2 * discordance)
    total = 0.0
    for d, upper in enumerate(rejections):
        if upper is None:
            continue
        p_d = _binomial_pmf(d, n, discordance, log_fact)
        c = np.arange(d + 1)
        pmf = np.exp(log_fact[d] - log_fact[c] - log_fact[d - c] + _xlogy(c, q) + _xlogy(d - c, 1 - q))
        total += p_d * (pmf[upper:].sum() + pmf[: d - upper + 1].sum())
    return float(min(total, 1.0))


def _xlogy(x: np.ndarray | int, y: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if y <= 0:
        return np.where(x == 0, 0.0, -np.inf)
    return x * math.log(y)


def _binomial_pmf(k: int, n: int, p: float, log_fact: np.ndarray) -> float:
    return float(np.exp(log_fact[n] - log_fact[k] - log_fact[n - k] + _xlogy(k, p) + _xlogy(n - k, 1 - p)))


def mcnemar_detectable(n: int, discordance: float, *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """δ*: the smallest change in a 0/1 outcome's rate the exact McNemar test calls (the module's formula).

    ``discordance`` is ψ̂, the share of records whose outcome differs between the runs.
    None when no change, however large, would be called with that power (too few records).
    """
    if n <= 0:
        return None
    if n > EXACT_MAX:
        return _connor_detectable(n, discordance, alpha, power)
    rejections = rejection_counts(n, alpha)

    def enough(delta: float) -> bool:
        return mcnemar_power(n, max(discordance, delta), delta, alpha=alpha, rejections=rejections) >= power

    return _smallest(enough)


def _smallest(enough: Callable[[float], bool]) -> float | None:
    """The smallest δ in (0, 1] for which ``enough(δ)`` holds, by bisection (``enough`` grows with δ); None if 1 fails."""
    if not enough(1.0):
        return None
    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        middle = (low + high) / 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def _connor_detectable(n: int, discordance: float, alpha: float, power: float) -> float | None:
    """Connor's normal approximation, n δ² = (z_a √ψ + z_b √(ψ − δ²))², solved for δ with ψ = max(ψ̂, δ)."""
    z_a, z_b = _z(1 - alpha / 2), _z(power)

    def enough(delta: float) -> bool:
        psi = max(discordance, delta)
        return math.sqrt(n) * delta >= z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta * delta, 0.0))

    return _smallest(enough)


def wilcoxon_detectable(n: int, spread: float, *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """δ*: the smallest shift of the per-record differences' mean the Wilcoxon signed-rank test calls.

    ``spread`` is σ, the standard deviation of the differences B − A (the module's
    formula). None without records.
    """
    if n <= 0:
        return None
    return (_z(1 - alpha / 2) + _z(power)) * spread / math.sqrt(n * 3 / math.pi)


def records_needed(change: float, discordance: float, *, alpha: float = ALPHA, power: float = POWER) -> int:
    """The fewest paired records for which a change of ``change`` in a 0/1 rate is detectable (δ* ≤ change).

    Connor's formula gives the start; the exact test is then checked upwards from it.
    """
    if not 0 < change <= 1:
        raise ValueError(f"a change to detect lies in (0, 1], not {change}")
    psi = max(discordance, change)
    z_a, z_b = _z(1 - alpha / 2), _z(power)
    n = max(1, math.floor(((z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - change * change, 0.0))) / change) ** 2))
    while n <= EXACT_MAX and mcnemar_power(n, psi, change, alpha=alpha) < power:
        n += 1
    return n
