"""The paired tests without scipy give scipy's p-values: a differential test over many random cases."""

from __future__ import annotations

import numpy as np
import pytest

from docpilot.reports.compare import EXACT_WILCOXON_MAX, PERMUTATION_WILCOXON_MAX, wilcoxon
from docpilot.reports.stats import average_ranks, binomial_two_sided, signed_rank

stats = pytest.importorskip("scipy.stats", reason="scipy (the test extra) is the reference")


@pytest.mark.slow
def test_binomial_matches_scipys_binomtest_over_every_small_case():
    for trials in range(1, 61):
        for successes in range(trials + 1):
            expected = stats.binomtest(successes, trials, 0.5).pvalue
            assert binomial_two_sided(successes, trials) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_binomial_matches_scipy_on_large_counts_and_far_tails():
    rng = np.random.default_rng(7)
    for trials in (500, 1000, 5000):
        for successes in [0, 1, trials // 2, trials // 2 - 1, *rng.integers(0, trials + 1, size=10).tolist()]:
            expected = stats.binomtest(successes, trials, 0.5).pvalue
            assert binomial_two_sided(successes, trials) == pytest.approx(expected, rel=1e-10, abs=1e-300)


def test_binomial_refuses_a_count_outside_the_trials():
    with pytest.raises(ValueError, match="successes"):
        binomial_two_sided(4, 3)


def test_average_ranks_are_scipys_rankdata():
    rng = np.random.default_rng(3)
    for _ in range(50):
        values = rng.integers(0, 6, size=rng.integers(1, 30)).astype(float)
        ranks, sizes = average_ranks(values)
        assert np.array_equal(ranks, stats.rankdata(values))
        assert sorted(sizes.tolist()) == sorted(np.unique(values, return_counts=True)[1].tolist())


def _random_differences(rng, n: int, *, ties: bool) -> np.ndarray:
    if ties:
        magnitudes = rng.integers(1, max(2, n // 2), size=n) / 4.0
    else:
        magnitudes = rng.permutation(np.arange(1, n + 1)) + rng.random(n) * 0.5
    return magnitudes * rng.choice([-1.0, 1.0], size=n, p=[0.4, 0.6])


def test_exact_signed_rank_matches_scipy_without_ties():
    rng = np.random.default_rng(11)
    for n in list(range(1, 21)) + [30, 40, EXACT_WILCOXON_MAX]:
        for _ in range(6):
            diffs = _random_differences(rng, n, ties=False)
            expected = stats.wilcoxon(diffs, zero_method="wilcox", method="exact")
            statistic, p = signed_rank(diffs, "exact")
            assert statistic == expected.statistic
            assert p == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-12)


@pytest.mark.slow
def test_exact_signed_rank_with_ties_is_scipys_permutation_test():
    rng = np.random.default_rng(5)
    for n in range(2, PERMUTATION_WILCOXON_MAX + 1):
        for _ in range(4 if n <= 9 else 1):  # scipy's side enumerates 2ⁿ sign flips: the large n are slow
            diffs = _random_differences(rng, n, ties=True)
            expected = stats.wilcoxon(diffs, zero_method="wilcox", method=stats.PermutationMethod())
            statistic, p = signed_rank(diffs, "exact")
            assert statistic == expected.statistic
            assert p == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-12)


def test_asymptotic_signed_rank_matches_scipy_with_and_without_ties():
    rng = np.random.default_rng(17)
    for n in (5, 14, 51, 120, 400):
        for ties in (False, True):
            for _ in range(4):
                diffs = _random_differences(rng, n, ties=ties)
                expected = stats.wilcoxon(diffs, zero_method="wilcox", method="asymptotic")
                statistic, p = signed_rank(diffs, "asymptotic")
                assert statistic == expected.statistic
                assert p == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-15)


def test_signed_rank_of_balanced_differences_is_p_1_in_both_methods():
    diffs = np.array([1.0, -1.0, 2.0, -2.0])
    assert signed_rank(diffs, "exact")[1] == 1.0
    assert signed_rank(diffs, "asymptotic")[1] == pytest.approx(stats.wilcoxon(diffs, method="asymptotic").pvalue)


def test_signed_rank_refuses_zero_differences():
    with pytest.raises(ValueError, match="non-zero"):
        signed_rank(np.array([0.5, 0.0]), "exact")


@pytest.mark.slow
def test_compare_wilcoxon_with_zeros_and_ties_is_scipys_auto_choice():
    # compare.py's own choice of method, on random paired outcomes with zeros and ties,
    # against scipy given the same non-zero differences and the method it picks itself.
    rng = np.random.default_rng(23)
    for n in (4, 9, 13, 20, 45, 60, 200):
        for _ in range(4):
            a = rng.integers(0, 5, size=n) / 4.0
            b = np.where(rng.random(n) < 0.3, a, rng.integers(0, 5, size=n) / 4.0)
            diffs = b - a
            nonzero = diffs[diffs != 0]
            if nonzero.size == 0:
                continue
            statistic, p, _, _ = wilcoxon(a.tolist(), b.tolist())
            ties = np.unique(np.abs(nonzero)).size < nonzero.size
            if not ties and nonzero.size <= EXACT_WILCOXON_MAX:
                method = "exact"
            elif ties and nonzero.size <= PERMUTATION_WILCOXON_MAX:
                method = stats.PermutationMethod()
            else:
                method = "asymptotic"
            expected = stats.wilcoxon(nonzero, zero_method="wilcox", method=method)
            assert statistic == expected.statistic
            assert p == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-12)
