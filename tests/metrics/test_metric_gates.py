"""Gates: condition parsing, built-in gates naming their records, user gates, the verdict."""

from __future__ import annotations

import pytest
from docpilot.metrics.gates import check_gates, holds, parse_condition, telling_decimals, verdict
from docpilot.metrics.summary import summarize

from docpilot.errors import InputError
from docpilot.schema import GateResult


@pytest.mark.parametrize(
    ("text", "expected"),
    [(">= 0.8", (">=", 0.8)), ("<=4000", ("<=", 4000.0)), ("== 0", ("==", 0.0)),
     (" > .5 ", (">", 0.5)), ("< 1e3", ("<", 1000.0)), (">= -1", (">=", -1.0))],
)
def test_parse_condition_accepts_operator_and_number(text: str, expected: tuple) -> None:
    assert parse_condition(text) == expected


@pytest.mark.parametrize("text", ["0.8", "=> 0.8", "= 0", ">= high", ">= 0.8 0.9", "", "!= 0"])
def test_parse_condition_rejects_other_forms_and_lists_the_accepted_ones(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_condition(text, metric="recall@8")
    message = str(err.value)
    assert "recall@8" in message
    assert ">= 0.8" in message and "== 0" in message and "<= 4000" in message


def _run(make_row):
    return [
        make_row("p1", gold=["a#"], retrieved=["a#"], answer="x", hallucinated=["7"],
                 sources_shown=["a#"], links=0),
        make_row("p2", gold=["a#"], retrieved=["b#", "a#"], answer="x", scope=["a"],
                 sources_shown=["a#"], links=2),
        make_row("p3", gold=["a#"], retrieved=["a#"], answer="x"),
        make_row("n1", kind="negative", answer="x", sources_shown=["a#"], links=0),
    ]


def test_builtin_gates_name_the_records_that_broke_them(make_row) -> None:
    rows = _run(make_row)
    summary, _ = summarize(rows)
    gates = check_gates(summary, rows, {})
    by_metric = {g.metric: g for g in gates}
    assert [g.metric for g in gates] == ["hallucinated_citations", "scope_violations",
                                         "unlinked_answers", "errors"]
    assert by_metric["hallucinated_citations"].records == ["p1"]
    assert by_metric["hallucinated_citations"].value == 1.0
    assert by_metric["scope_violations"].records == ["p2"]  # b# lies outside scope ["a"]
    # The unlinked negative is reported apart and breaks nothing.
    assert by_metric["unlinked_answers"].records == ["p1"]
    assert [g.passed for g in gates] == [False, False, False, True]  # no row errored
    assert verdict(gates) == "fail"


def test_a_clean_run_passes(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], answer="x", sources_shown=["a#"],
                     links=1)]
    summary, _ = summarize(rows)
    gates = check_gates(summary, rows, {"recall@8": ">= 0.8", "mrr": "== 1"})
    assert [g.metric for g in gates][-2:] == ["recall@8", "mrr"]
    assert all(g.passed and g.records == [] for g in gates)
    assert verdict(gates) == "pass"


def test_user_gates_compare_in_order(make_row) -> None:
    rows = _run(make_row)
    summary, _ = summarize(rows)
    gates = check_gates(summary, rows, {"mrr": ">= 0.9", "recall@1": "< 1", "recall@8": "> 0.99"})
    user = gates[4:]
    assert [(g.metric, g.op, g.threshold, g.passed) for g in user] == [
        ("mrr", ">=", 0.9, False), ("recall@1", "<", 1.0, True), ("recall@8", ">", 0.99, True),
    ]
    assert user[0].value == pytest.approx(5 / 6)


def test_a_gate_on_a_metric_with_nothing_to_measure_fails(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], answer="x")]
    summary, _ = summarize(rows)
    gates = check_gates(summary, rows, {"negatives_caught": ">= 0.9", "stage_model_p95": "<= 10"})
    assert [(g.metric, g.value, g.passed) for g in gates[4:]] == [
        ("negatives_caught", None, False), ("stage_model_p95", None, False),
    ]
    assert verdict(gates) == "fail"


def test_user_count_gates_name_records_too(make_row) -> None:
    rows = _run(make_row)
    summary, _ = summarize(rows)
    gate = check_gates(summary, rows, {"unlinked_negatives": "== 0"})[-1]
    assert (gate.passed, gate.records) == (False, ["n1"])


def test_an_unknown_metric_lists_the_valid_ids(make_row) -> None:
    with pytest.raises(InputError, match=r"(?s)unknown metric .recall@10.*recall@8"):
        check_gates({}, [], {"recall@10": ">= 0.5"})


def test_gate_only_skips_builtins_and_non_retrieval_conditions(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["b#", "a#"], hallucinated=["3"])]
    summary, _ = summarize(rows, gate_only=True)
    gates = check_gates(summary, rows, {"recall@8": ">= 0.8", "answer_f1": ">= 0.3"},
                        gate_only=True)
    assert [g.metric for g in gates] == ["recall@8"]
    assert verdict(gates) == "pass"
    # A malformed condition is still an error, even for a gate that would be skipped.
    with pytest.raises(InputError):
        check_gates(summary, rows, {"answer_f1": "high"}, gate_only=True)


def test_verdict() -> None:
    ok = GateResult(metric="mrr", op=">=", threshold=0.5, value=0.6, passed=True)
    bad = GateResult(metric="mrr", op=">=", threshold=0.7, value=0.6, passed=False)
    assert verdict([]) == "pass"
    assert verdict([ok]) == "pass"
    assert verdict([ok, bad]) == "fail"


def test_errored_records_fail_the_run_unless_allowed(make_row) -> None:
    rows = [make_row(id="ok"), make_row(id="cut", error="stream ended before [DONE] after 3 chunks")]
    summary, _ = summarize(rows)
    assert summary["errors"] == 1
    gate = [g for g in check_gates(summary, rows, {}) if g.metric == "errors"][0]
    assert (gate.passed, gate.records) == (False, ["cut"])
    assert "errors" not in [g.metric for g in check_gates(summary, rows, {}, allow_errors=True)]


def test_gates_on_metrics_a_record_set_cannot_produce_are_left_out(make_row) -> None:
    rows = _run(make_row)
    summary, _ = summarize(rows)
    conditions = {"recall@8": ">= 0.5", "attack_success_rate": "<= 0", "latency_p95": "<= 100000"}
    golden = [g.metric for g in check_gates(summary, rows, conditions)][4:]
    attacks = [g.metric for g in check_gates(summary, rows, conditions, record_set="adversarial")][4:]
    assert golden == ["recall@8", "latency_p95"]
    assert attacks == ["attack_success_rate", "latency_p95"]


def test_a_value_a_rounding_below_the_floor_passes_it(make_row) -> None:
    # Regression: a mean F1 of 0.25 on paper, 0.24999999999999994 in floating point, failed '>= 0.25'.
    *_, gate = check_gates({"answer_f1": 0.24999999999999994}, [], {"answer_f1": ">= 0.25"})
    assert gate.passed
    *_, gate = check_gates({"answer_f1": 0.2499999}, [], {"answer_f1": ">= 0.25"})
    assert not gate.passed
    *_, gate = check_gates({"answer_f1": 0.25000000000000006}, [], {"answer_f1": "> 0.25"})
    assert not gate.passed


def test_holds_compares_exactly_away_from_the_threshold() -> None:
    assert holds("<", 0.1, 0.2) and not holds("<", 0.2, 0.2) and holds("==", 0.0, 0.0)
    assert holds("<=", 1e-13, 0) and not holds("<=", 1e-6, 0)


# Regression: a failing 0.7996 against '>= 0.8' printed as 0.800, which reads as a pass.
@pytest.mark.parametrize(
    ("op", "value", "threshold", "usual", "places"),
    [
        (">=", 0.7996, 0.8, 3, 4),      # 0.800 would read as a pass; 0.7996 is below
        (">=", 0.79996, 0.8, 3, 5),
        (">=", 0.7, 0.8, 3, 3),         # already on its side: the usual digits
        (">", 0.8004, 0.8, 3, 4),       # a pass that 0.800 would show as a fail
        ("==", 0.8004, 0.8, 3, 4),
        ("<=", 4000.4, 4000.0, 0, 1),   # 4,000 ms would read as within the limit
        (">=", 0.24999999999999994, 0.25, 3, 3),  # counts as equal, and passes, as 0.250 says
        ("<=", 2e-12, 0.0, 3, 12),
    ],
)
def test_telling_decimals_is_the_shortest_rounding_on_the_verdicts_side(op, value, threshold, usual, places) -> None:
    assert telling_decimals(op, value, threshold, usual) == places
    shown = round(value, places)
    assert holds(op, shown, threshold) == holds(op, value, threshold)
    if places > usual:
        assert holds(op, round(value, places - 1), threshold) != holds(op, value, threshold)
