"""Comparing runs: metric moves, and the paired tests checked against scipy (docpilot.reports.compare)."""

from __future__ import annotations

import numpy as np
import pytest

from docpilot.errors import InputError
from docpilot.reports.compare import compare_reports, mcnemar, wilcoxon
from docpilot.reports.moves import metric_moves
from docpilot.reports.report import score, write_report
from docpilot.reports.store import ReportStore
from docpilot.schema import Report, Row

# McNemar -------------------------------------------------------------------------


@pytest.mark.parametrize(("worse", "better", "same"), [(1, 6, 10), (3, 3, 0), (0, 9, 2), (12, 2, 30)])
def test_mcnemar_is_the_two_sided_binomial_test_on_discordant_pairs(worse, better, same):
    from scipy import stats
    a = [1] * worse + [0] * better + [1] * same
    b = [0] * worse + [1] * better + [1] * same
    count_b, count_c, p, note = mcnemar(a, b)
    assert (count_b, count_c, note) == (worse, better, None)
    assert p == pytest.approx(stats.binomtest(worse, worse + better, 0.5).pvalue, rel=1e-12)


def test_mcnemar_without_discordant_pairs_is_p_1():
    assert mcnemar([1, 0, 1], [1, 0, 1]) == (0, 0, 1.0, "no record flipped")


# Wilcoxon ------------------------------------------------------------------------

_RNG = np.random.default_rng(7)


def test_wilcoxon_small_without_ties_is_scipys_exact_test():
    from scipy import stats
    a = _RNG.uniform(size=20)
    b = a + _RNG.normal(0.1, 0.2, size=20)
    statistic, p, method, note = wilcoxon(a, b)
    expected = stats.wilcoxon(b - a, zero_method="wilcox", method="exact")
    assert (method, note) == ("exact", None)
    assert p == pytest.approx(expected.pvalue, rel=1e-12)
    assert statistic == pytest.approx(expected.statistic)


def test_wilcoxon_drops_zero_differences_before_the_exact_test():
    from scipy import stats
    a = np.round(_RNG.uniform(size=18), 3)
    b = a.copy()
    b[:12] += np.round(_RNG.normal(0.05, 0.2, size=12), 3)  # six records unchanged
    diffs = b - a
    _, p, method, _ = wilcoxon(a, b)
    assert method == "exact"
    nonzero = diffs[np.abs(diffs) > 1e-12]
    assert p == pytest.approx(stats.wilcoxon(nonzero, zero_method="wilcox", method="exact").pvalue, rel=1e-12)


def test_wilcoxon_with_ties_among_few_differences_uses_every_sign_permutation():
    from scipy import stats
    a = [0.0] * 8
    b = [0.5, 0.5, -0.25, 0.25, 1.0, 0.75, 0.5, 0.0]
    _, p, method, _ = wilcoxon(a, b)
    assert method.startswith("exact (all sign permutations")
    nonzero = np.array([x for x in b if x])
    assert p == pytest.approx(stats.wilcoxon(nonzero, zero_method="wilcox").pvalue, rel=1e-12)


def test_wilcoxon_on_many_differences_is_the_normal_approximation():
    from scipy import stats
    a = _RNG.uniform(size=80)
    b = a + _RNG.normal(0.02, 0.1, size=80)
    _, p, method, _ = wilcoxon(a, b)
    assert method == "normal approximation"
    expected = stats.wilcoxon(b - a, zero_method="wilcox", method="asymptotic")
    assert p == pytest.approx(expected.pvalue, rel=1e-12)


def test_wilcoxon_with_every_difference_zero_is_p_1_with_a_note():
    statistic, p, _, note = wilcoxon([0.2, 0.5], [0.2, 0.5])
    assert (statistic, p, note) == (None, 1.0, "every difference is zero")


# compare_reports -----------------------------------------------------------------


def _row(rid: str, *, hit: bool = True, f1: bool = True, split: str = "test", kind: str = "positive") -> Row:
    if kind == "negative":
        return Row(id=rid, kind="negative", split=split, question="?", answer=None if f1 else "yes",
                   refused=f1, refused_by="model" if f1 else None)
    retrieved = ["p#gold", "p#x"] if hit else ["p#x", "p#y"]
    answer = "the answer is here" if f1 else "something else"
    return Row(id=rid, kind="positive", split=split, question="?", gold=["p#gold"], retrieved=retrieved,
               primed=retrieved, answer=answer, gold_answer="the answer is here", citations=retrieved[:1])


def _report(rows: list[Row], *, run_id: str, split: str = "test", config: str = "k1", **fields) -> Report:
    summary, counts, gates, verdict = score(rows, {}, gate_only=fields.get("gate_only", False))
    return Report(run_id=run_id, created_at="2026-01-01T00:00:00+00:00", config={},
                  fingerprints={"golden": "g", "corpus": "c", "model": "m", "config": config, "code": "x"},
                  split=split, rows=rows, summary=summary, counts=counts, gates=gates, verdict=verdict, **fields)


def _pair():
    a = [_row("r1", hit=False), _row("r2", hit=False), _row("r3"), _row("r4", f1=False), _row("r5"),
         _row("n1", kind="negative", f1=False)]
    b = [_row("r1"), _row("r2"), _row("r3", hit=False), _row("r4"), _row("r5"),
         _row("n1", kind="negative", f1=True)]
    return _report(a, run_id="A", config="k1"), _report(b, run_id="B", config="k2")


def test_records_that_flipped_are_listed_with_mcnemar_counts():
    from scipy import stats
    a, b = _pair()
    comparison = compare_reports(a, b)
    tests = {t.outcome: t for t in comparison.tests}
    assert list(tests) == ["recall@8", "refusal_correct", "answer_f1", "ndcg@8", "mrr"]
    hit = tests["recall@8"]
    assert (hit.n, hit.b, hit.c) == (5, 1, 2)
    assert [f.id for f in hit.better] == ["r1", "r2"] and [f.id for f in hit.worse] == ["r3"]
    assert hit.p_value == pytest.approx(stats.binomtest(1, 3, 0.5).pvalue)
    assert hit.effect == pytest.approx(0.2)
    refusal = tests["refusal_correct"]
    assert (refusal.n, refusal.b, refusal.c) == (6, 0, 1) and refusal.better[0].id == "n1"
    f1 = tests["answer_f1"]
    assert [f.id for f in f1.better] == ["r4"] and f1.direction == "none"
    assert comparison.changed == ["config"] and comparison.records == 6


def test_comparing_on_the_test_split_warns_to_choose_on_dev(tmp_path):
    a, b = _pair()
    warnings = compare_reports(a, b).warnings
    assert any("prove on test, choose on dev" in w for w in warnings)
    store = ReportStore(tmp_path)
    assert any("no dev-split run of B's settings" in w for w in compare_reports(a, b, store=store).warnings)
    dev = _report([_row("d1", split="dev")], run_id="20260101T000000Z-dddddd", split="dev", config="k2")
    write_report(dev, tmp_path / f"{dev.run_id}.json")
    assert not any("no dev-split run" in w for w in compare_reports(a, b, store=ReportStore(tmp_path)).warnings)


def test_runs_that_differ_in_records_or_settings_are_flagged():
    a, b = _pair()
    b = b.model_copy(update={"rows": b.rows[:4] + [_row("extra")], "gate_only": False, "split": "dev"})
    comparison = compare_reports(a, b)
    assert comparison.only_a == ["r5", "n1"] and comparison.only_b == ["extra"]
    assert comparison.records == 4
    assert "not comparable: split differs (test vs dev)" in comparison.warnings
    assert any("2 only in A, 1 only in B" in w for w in comparison.warnings)


def test_same_settings_are_flagged_as_noise_and_gate_only_skips_model_outcomes():
    a, _ = _pair()
    b = a.model_copy(update={"run_id": "B", "gate_only": True})
    comparison = compare_reports(a, b)
    assert any("any difference is noise" in w for w in comparison.warnings)
    tests = {t.outcome: t for t in comparison.tests}
    assert tests["answer_f1"].n == 0 and tests["answer_f1"].note == "a gate-only run called no model"
    assert tests["ndcg@8"].p_value == 1.0 and tests["ndcg@8"].note == "every difference is zero"


def test_runs_with_no_record_in_common_cannot_be_compared():
    a, b = _pair()
    b = b.model_copy(update={"rows": [_row("other")]})
    with pytest.raises(InputError, match="no record in common"):
        compare_reports(a, b)


# metric_moves --------------------------------------------------------------------


def test_moves_follow_each_metrics_direction():
    a, b = _pair()
    before = a.model_copy(update={"summary": {"recall@8": 0.5, "latency_p95": 100.0, "answer_f1": None,
                                              "mrr": 0.4}})
    after = b.model_copy(update={"summary": {"recall@8": 0.75, "latency_p95": 120.0, "answer_f1": 0.3,
                                             "mrr": 0.4}, "counts": {"recall@8": 4}})
    moves = {m.metric: m for m in metric_moves(after, before)}
    assert (moves["recall@8"].delta, moves["recall@8"].change, moves["recall@8"].n) == (0.25, "better", 4)
    assert (moves["latency_p95"].delta, moves["latency_p95"].change) == (20.0, "worse")
    assert (moves["answer_f1"].delta, moves["answer_f1"].change) == (None, None)
    assert moves["mrr"].change == "same"
    assert all(m.previous is None and m.change is None for m in metric_moves(after, None))


# Regression: `improve compare` printed "hit@8" and "reciprocal_rank" where the scorecard says recall@8 and mrr.
def test_each_outcome_is_named_as_the_scorecard_names_its_metric_and_averages_to_it():
    a, b = _pair()
    tests = {t.outcome: t for t in compare_reports(a, b).tests}
    for name in ("recall@8", "ndcg@8", "mrr", "answer_f1"):
        assert name in b.summary
        assert tests[name].mean_b == pytest.approx(b.summary[name])


def test_a_recall_that_is_a_share_is_tested_by_wilcoxon():
    two = Row(id="two", kind="positive", split="test", question="?", gold=["p#gold", "q#gold"],
              retrieved=["p#gold", "p#x"], primed=["p#gold"], answer="a", gold_answer="a", citations=["p#gold"])
    found = two.model_copy(update={"retrieved": ["p#gold", "q#gold"]})
    a, b = _report([two, _row("r1")], run_id="A"), _report([found, _row("r1")], run_id="B", config="k2")
    recall = next(t for t in compare_reports(a, b).tests if t.outcome == "recall@8")
    assert recall.test == "wilcoxon" and [(f.a, f.b) for f in recall.better] == [(0.5, 1.0)]


# Regression: "answer_f1 worse … (0.12→0.12)": a move is printed with the digits that show it.
def test_a_move_and_an_effect_print_with_the_digits_that_show_them():
    from docpilot.reports.compare import describe_effect, describe_move

    assert describe_move(0.118, 0.124) == "0.118→0.124"
    assert describe_move(0.0, 1.0) == "0.00→1.00"
    assert describe_move(0.123411, 0.123414) == "0.123411→0.123414"
    assert describe_effect(0.0004) == "+0.0004" and describe_effect(-0.25) == "-0.250"
    assert describe_effect(0.0) == "+0.000"
