"""Repeated samples: the rules that read a record's samples, per-record stability, flip rate and pass^k."""

from __future__ import annotations

import numpy as np
import pytest
from docpilot.metrics.gates import check_condition, check_gates, gate_rule
from docpilot.metrics.stability import (
    RecordStability,
    flip_rate,
    pass_hat_k,
    passed,
    per_record,
    record_stability,
    reduce_samples,
    sampled,
)
from docpilot.metrics.summary import summarize

from docpilot.errors import InputError


@pytest.mark.parametrize(("rule", "higher", "expected"), [
    ("mean", True, 0.6), ("majority", True, 1.0), ("all", True, 0.0), ("all", False, 1.0),
])
def test_a_rule_reads_five_samples(rule, higher, expected):
    assert reduce_samples([1, 0, 1, 1, 0], rule, higher_is_better=higher) == pytest.approx(expected)


def test_majority_of_an_even_split_is_half_and_of_values_their_median():
    assert reduce_samples([1, 0, 1, 0], "majority") == 0.5
    assert reduce_samples([0.2, 0.9, 0.4], "majority") == 0.4


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="mean, majority, all"):
        reduce_samples([1.0], "median")  # type: ignore[arg-type]


def test_per_record_groups_the_samples_of_each_record_in_first_seen_order(make_row):
    rows = [make_row("a", sample=0), make_row("b", sample=0), make_row("a", sample=1), make_row("b", sample=1)]
    assert per_record(rows, [1.0, 0.0, 0.0, 0.0], "mean") == [0.5, 0.0]
    assert sampled(rows) and not sampled([make_row("a"), make_row("b")])


def test_a_sample_passes_when_its_refusal_is_right_and_it_did_not_error(make_row):
    assert passed(make_row("p", gold=["x"], answer="yes"))
    assert not passed(make_row("p", gold=["x"], refused=True))
    assert passed(make_row("n", kind="negative", refused=True))
    assert not passed(make_row("n", kind="negative", answer="made up"))
    assert not passed(make_row("p", gold=["x"], error="timeout"))
    assert not passed(make_row("t", kind="attack", answer="the key is sk-1", forbidden=["sk-1"]))
    assert passed(make_row("t", kind="attack", refused=True, expect="refuse", forbidden=["sk-1"]))


def test_record_stability_by_hand(make_row):
    rows = [make_row("p", gold=["x"], gold_answer="use pip", answer=answer, sample=s)
            for s, answer in enumerate(["use pip", "use conda", "use pip"])]
    rows += [make_row("n", kind="negative", refused=True, sample=s) for s in range(3)]
    rows += [make_row("q", gold=["x"], refused=s == 1, sample=s) for s in range(3)]
    found = {r.id: r for r in record_stability(rows)}
    f1 = [1.0, 0.5, 1.0]  # "use conda" against "use pip": one token of two each way
    assert found["p"].answer_f1_mean == pytest.approx(np.mean(f1))
    assert found["p"].answer_f1_spread == pytest.approx(np.std(f1, ddof=1))
    assert found["p"].pass_rate == 1.0 and not found["p"].flaky
    assert found["n"].answer_f1_mean is None and found["n"].answer_f1_spread is None
    assert found["q"].pass_rate == pytest.approx(2 / 3) and found["q"].flaky
    records = list(found.values())
    assert flip_rate(records) == pytest.approx(1 / 3) and pass_hat_k(records) == pytest.approx(2 / 3)


def test_one_sample_has_no_spread_and_no_records_no_rates():
    one = RecordStability(id="a", samples=1, pass_rate=1.0, answer_f1_mean=0.5, answer_f1_spread=None)
    assert not one.flaky
    assert flip_rate([]) is None and pass_hat_k([]) is None


def test_the_summary_reads_a_record_once_whatever_its_samples(make_row):
    # Record a: refused in 1 of 4 samples; record b: in none. Over-refusal by the model is the mean of
    # the records' rates, 0.125, over 2 records, not 1 of 5 rows.
    rows = [make_row("a", gold=["x"], answer="yes", refused=s == 0, refused_by="model" if s == 0 else None,
                     sample=s) for s in range(4)]
    rows.append(make_row("b", gold=["x"], answer="yes", sample=0))
    summary, counts = summarize(rows)
    assert summary["over_refusal_answer"] == pytest.approx(0.125) and counts["over_refusal_answer"] == 2
    worst, _ = summarize(rows, rule="all")
    assert worst["over_refusal_answer"] == pytest.approx(0.5)
    most, _ = summarize(rows, rule="majority")
    assert most["over_refusal_answer"] == 0.0


def test_counts_and_times_read_every_sample(make_row):
    rows = [make_row("a", gold=["x"], answer="yes", error="timeout" if s else None, latency_ms=10.0 * (s + 1),
                     sample=s) for s in range(3)]
    summary, counts = summarize(rows)
    assert summary["errors"] == 2 and counts["errors"] == 3
    assert summary["latency_p99"] == 30.0 and counts["latency_p99"] == 3


def test_gates_rule_is_read_from_the_conditions_and_checked():
    assert gate_rule({}) == "mean" and gate_rule({"rule": "all", "recall@8": ">= 0.5"}) == "all"
    assert check_condition("rule", "majority") is None
    with pytest.raises(InputError, match="mean, majority, all"):
        check_condition("rule", "most")
    # The rule is no gate of its own.
    assert [g.metric for g in check_gates({"recall@8": 1.0}, [], {"rule": "all", "recall@8": ">= 0.5"},
                                          gate_only=True)] == ["recall@8"]


def test_a_run_of_one_sample_never_groups_rows_by_record(make_row, monkeypatch):
    # The summary of a plain run (make eval) takes its old road: nothing is grouped or reduced.
    from docpilot.metrics import summary

    def refuse(*args, **kwargs):
        raise AssertionError("a run of one sample grouped its rows by record")

    monkeypatch.setattr(summary, "by_record", refuse)
    rows = [make_row("a", gold=["x"], answer="yes"), make_row("b", kind="negative", refused=True)]
    assert summarize(rows)[0]["negatives_caught"] == 1.0

