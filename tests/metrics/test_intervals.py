"""The page-clustered bootstrap interval: against a loop written out, scipy's bootstrap, and coverage by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from docpilot.metrics.intervals import cluster_interval, headline_intervals, page_of


def _loop_interval(values, clusters, replicates, seed):
    """The same draws as cluster_interval, summed cluster by cluster in plain Python."""
    keys = list(dict.fromkeys(clusters))
    draws = np.random.default_rng(seed).integers(0, len(keys), size=(replicates, len(keys)))
    means = []
    for draw in draws:
        chosen = [v for k in draw for v, c in zip(values, clusters, strict=True) if c == keys[k]]
        means.append(sum(chosen) / len(chosen))
    return tuple(np.quantile(means, [0.025, 0.975]))


def test_the_interval_is_the_formula_written_out_and_the_same_for_the_same_rows():
    values = [1, 0, 1, 1, 0, 0, 1, 0.5, 1, 0]
    clusters = ["a", "a", "a", "b", "b", "c", "d", "d", "e", "e"]
    found = cluster_interval(values, clusters, replicates=500, seed=3)
    assert found == pytest.approx(_loop_interval(values, clusters, 500, 3), abs=1e-12)
    assert found == cluster_interval(values, clusters, replicates=500, seed=3)
    assert cluster_interval([], []) is None


def test_with_a_record_per_page_it_is_scipys_percentile_bootstrap_of_the_mean():
    from scipy import stats
    values = np.random.default_rng(1).uniform(0, 1, 60)
    ours = cluster_interval(list(values), [str(i) for i in range(60)], replicates=20_000)
    theirs = stats.bootstrap((values,), np.mean, n_resamples=20_000, method="percentile",
                             random_state=np.random.default_rng(2)).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.006)


def test_pages_resampled_together_cover_the_true_mean_where_questions_resampled_alone_do_not():
    # 15 pages of 6 questions; a page's questions share its difficulty: the true mean recall is 0.6.
    rng = np.random.default_rng(54)
    pages = [f"p{g}" for g in range(15) for _ in range(6)]
    covered = {"page": 0, "question": 0}
    trials = 300
    for trial in range(trials):
        ease = rng.beta(1.2, 0.8, size=15)  # mean 0.6
        values = list((rng.uniform(size=90) < np.repeat(ease, 6)).astype(float))
        for how, clusters in (("page", pages), ("question", [str(i) for i in range(90)])):
            low, high = cluster_interval(values, clusters, replicates=1000, seed=trial)
            covered[how] += low <= 0.6 <= high
    assert covered["page"] / trials == pytest.approx(0.95, abs=0.05)
    assert covered["question"] / trials < 0.85


def test_headline_intervals_cluster_by_the_first_gold_page_and_read_a_records_samples_once(make_row):
    rows = [make_row(f"q{i}", gold=[f"guide/{'a' if i < 3 else 'b'}#s{i}"], retrieved=[f"guide/{'a' if i < 3 else 'b'}#s{i}"]
                     if i % 2 else ["other"], sample=s) for i in range(6) for s in range(2)]
    found = headline_intervals(rows, gate_only=True)
    per_record = [float(i % 2) for i in range(6)]
    assert found["recall@8"] == cluster_interval(per_record, ["page:guide/a"] * 3 + ["page:guide/b"] * 3)
    assert page_of(make_row("n", kind="negative")) == "record:n"
    assert set(found) == {"recall@8", "ndcg@8", "mrr"}  # gate-only: retrieval alone
