"""Refusal metrics: rates over positives and negatives, the Wilson bound, no-answer precision."""

from __future__ import annotations

import math
import random

import pytest
from docpilot.metrics.refusals import Z_ONE_SIDED_95, wilson_upper, wilson_upper95
from docpilot.metrics.summary import summarize


def _rows(make_row):
    return [
        make_row("p1", gold=["a#"], answer="x"),
        make_row("p2", gold=["a#"], refused=True, refused_by="gate",
                 refusal_cause="not-answerable"),
        make_row("p3", gold=["a#"], refused=True, refused_by="model",
                 refusal_cause="not-answerable"),
        make_row("p4", gold=["a#"], answer="x"),
        make_row("n1", kind="negative", expected_cause="out-of-scope",
                 refused=True, refused_by="gate", refusal_cause="out-of-scope"),
        make_row("n2", kind="negative", expected_cause="unsafe",
                 refused=True, refused_by="gate", refusal_cause="not-answerable"),
        make_row("n3", kind="negative", expected_cause="not-answerable",
                 refused=True, refused_by="model", refusal_cause="not-answerable"),
        make_row("n4", kind="negative", expected_cause="not-answerable", answer="invented"),
        make_row("t1", kind="attack", refused=True, refused_by="gate", refusal_cause="unsafe"),
    ]


def test_refusal_rates_by_hand(make_row) -> None:
    summary, counts = summarize(_rows(make_row))
    assert (summary["negatives_caught"], counts["negatives_caught"]) == (0.75, 4)
    assert (summary["over_refusal_gate"], counts["over_refusal_gate"]) == (0.25, 4)
    assert (summary["over_refusal_answer"], counts["over_refusal_answer"]) == (0.25, 4)
    assert summary["over_refusal_gate_upper95"] == pytest.approx(wilson_upper(1, 4))
    assert summary["over_refusal_answer_upper95"] == pytest.approx(wilson_upper(1, 4))
    assert counts["over_refusal_gate_upper95"] == 4


def test_no_answer_precision_counts_a_gate_refused_positive_as_wrong(make_row) -> None:
    # Gate refusals among positives and negatives: p2 (no expected cause: wrong),
    # n1 (right), n2 (wrong). The attack probe is not a golden record.
    summary, counts = summarize(_rows(make_row))
    assert summary["no_answer_precision"] == pytest.approx(1 / 3)
    assert counts["no_answer_precision"] == 3


def test_no_answer_precision_is_none_when_the_gate_refused_nothing(make_row) -> None:
    rows = [make_row("n1", kind="negative", expected_cause="not-answerable",
                     refused=True, refused_by="model", refusal_cause="not-answerable")]
    summary, counts = summarize(rows)
    assert summary["no_answer_precision"] is None
    assert counts["no_answer_precision"] == 0
    assert summary["negatives_caught"] == 1.0


def test_refusal_metrics_are_none_for_empty_populations(make_row) -> None:
    summary, _ = summarize([make_row("t1", kind="attack")])
    for name in ("negatives_caught", "over_refusal_gate", "over_refusal_gate_upper95",
                 "over_refusal_answer", "over_refusal_answer_upper95", "no_answer_precision"):
        assert summary[name] is None, name
    assert wilson_upper95([]) is None


def test_wilson_upper_by_hand() -> None:
    # 0 of 30: (z²/60 + z·√(z²/3600)) / (1 + z²/30) = (z²/30) / (1 + z²/30).
    z2 = Z_ONE_SIDED_95**2
    assert wilson_upper(0, 30) == pytest.approx((z2 / 30) / (1 + z2 / 30))
    assert wilson_upper(10, 10) == 1.0


def test_z_is_the_exact_normal_quantile() -> None:
    # Regression: z was rounded to 1.6449, which moved the bound in its sixth digit.
    from scipy.stats import norm
    assert Z_ONE_SIDED_95 == norm.ppf(0.95)


def test_wilson_upper_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint
    rng = random.Random(3)
    cases = [(0, 1), (1, 1), (0, 30), (3, 30), (30, 30)]
    for _ in range(300):
        nobs = rng.randint(1, 500)
        cases.append((rng.randint(0, nobs), nobs))
    for count, nobs in cases:
        _, upper = proportion_confint(count, nobs, alpha=0.10, method="wilson")
        assert math.isclose(wilson_upper(count, nobs), upper, rel_tol=0, abs_tol=1e-12)
        values = [1.0] * count + [0.0] * (nobs - count)
        assert math.isclose(wilson_upper95(values), upper, rel_tol=0, abs_tol=1e-12)
