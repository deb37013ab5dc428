"""The detectable change: exact McNemar power against brute force and simulation, Wilcoxon's against simulation."""

from __future__ import annotations

import numpy as np
import pytest
from docpilot.metrics.power import (
    EXACT_MAX,
    mcnemar_detectable,
    mcnemar_power,
    records_needed,
    rejection_counts,
    wilcoxon_detectable,
)

from docpilot.reports.compare import mcnemar, wilcoxon
from docpilot.reports.stats import binomial_two_sided


def test_the_rejection_counts_are_the_tests_own():
    for d, upper in enumerate(rejection_counts(60)):
        rejected = [c for c in range(d // 2 + 1, d + 1) if binomial_two_sided(c, d) < 0.05]
        assert upper == (min(rejected) if rejected else None)
    assert rejection_counts(6)[:7] == [None] * 6 + [6]  # six flips all one way: p = 2/64


@pytest.mark.parametrize(("n", "psi", "delta"), [(30, 0.3, 0.15), (12, 0.5, 0.4), (50, 0.1, 0.0), (25, 0.2, -0.1)])
def test_mcnemar_power_equals_a_brute_force_sum(n, psi, delta):
    from scipy import stats
    p01 = (psi + delta) / 2
    brute = 0.0
    for d in range(n + 1):
        for c in range(d + 1):
            if binomial_two_sided(c, d) < 0.05:
                brute += stats.binom.pmf(d, n, psi) * stats.binom.pmf(c, d, p01 / psi)
    assert mcnemar_power(n, psi, delta) == pytest.approx(brute, abs=1e-12)


def _simulated_mcnemar_power(n, psi, delta, reps, seed):
    rng = np.random.default_rng(seed)
    p01, p10 = (psi + delta) / 2, (psi - delta) / 2
    called = 0
    for _ in range(reps):
        kinds = rng.choice(3, size=n, p=[p01, p10, 1 - psi])  # improved, worsened, the same
        a = np.where(kinds == 1, 1.0, np.where(kinds == 0, 0.0, 1.0))
        b = np.where(kinds == 0, 1.0, np.where(kinds == 1, 0.0, 1.0))
        called += mcnemar(list(a), list(b))[2] < 0.05
    return called / reps


@pytest.mark.parametrize(("n", "psi"), [(40, 0.2), (100, 0.1)])
def test_at_the_detectable_change_a_simulated_mcnemar_calls_it_with_the_power_asked(n, psi):
    delta = mcnemar_detectable(n, psi)
    reps = 2000
    simulated = _simulated_mcnemar_power(n, max(psi, delta), delta, reps, seed=n)
    exact = mcnemar_power(n, max(psi, delta), delta)
    error = 3 * np.sqrt(exact * (1 - exact) / reps)
    assert exact >= 0.8 and abs(simulated - exact) <= error
    assert mcnemar_power(n, max(psi, delta * 0.97), delta * 0.97) < 0.8  # and a smaller change is not


def test_the_detectable_change_shrinks_as_the_set_grows():
    found = [mcnemar_detectable(n, 0.2) for n in (40, 80, 160, 320)]
    assert all(later < earlier for earlier, later in zip(found, found[1:], strict=False))
    assert found[1] / found[0] == pytest.approx(1 / np.sqrt(2), rel=0.15)  # about 1/√n


def test_too_few_records_detect_nothing_and_the_normal_approximation_takes_over_for_many():
    assert mcnemar_detectable(5, 0.5) is None  # five flips all one way are not significant
    assert mcnemar_detectable(0, 0.5) is None
    exact, approximate = mcnemar_detectable(EXACT_MAX, 0.2), mcnemar_detectable(EXACT_MAX + 1, 0.2)
    assert approximate == pytest.approx(exact, rel=0.05)


def test_records_needed_is_the_first_set_size_that_detects_the_change():
    n = records_needed(0.15, 0.25)
    assert mcnemar_detectable(n, 0.25) <= 0.15 < mcnemar_detectable(n - 1, 0.25)


@pytest.mark.slow
def test_at_the_detectable_shift_a_simulated_wilcoxon_calls_it_with_about_the_power_asked():
    n, sigma, reps = 40, 0.3, 600
    delta = wilcoxon_detectable(n, sigma)
    rng = np.random.default_rng(54)
    called = 0
    for _ in range(reps):
        diffs = rng.normal(delta, sigma, size=n)
        called += wilcoxon([0.0] * n, list(diffs))[1] < 0.05
    assert called / reps == pytest.approx(0.8, abs=3 * np.sqrt(0.8 * 0.2 / reps) + 0.02)
