"""Summaries: report keys, None for empty populations, gate-only scope, long-form rows."""

from __future__ import annotations

import pytest
from docpilot.metrics.registry import METRICS, RETRIEVAL_METRICS
from docpilot.metrics.summary import per_record, summarize


def test_an_empty_run_is_none_everywhere_never_zero() -> None:
    summary, counts = summarize([])
    assert list(summary) == list(METRICS)
    assert all(value is None for value in summary.values())
    assert all(n == 0 for n in counts.values())


def test_every_fixed_metric_has_a_value_and_a_count(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], answer="x", latency_ms=1.0)]
    summary, counts = summarize(rows)
    assert list(summary) == list(counts) == list(METRICS)


def test_retrieval_metrics_average_over_positives_only(make_row) -> None:
    rows = [
        make_row("p1", gold=["guide/auth"], retrieved=["x#", "guide/auth#a"]),
        make_row("p2", gold=["faq#q"], retrieved=["faq#q"]),
        make_row("n1", kind="negative", retrieved=["guide/auth#a"]),
        make_row("t1", kind="attack", retrieved=["faq#q"]),
    ]
    summary, counts = summarize(rows)
    assert counts["recall@1"] == 2
    assert summary["recall@1"] == 0.5
    assert summary["mrr"] == 0.75
    assert summary["recall@8"] == 1.0


def test_gate_only_reports_retrieval_only(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], latency_ms=3.0,
                     stages_ms={"embed": 1.0})]
    summary, counts = summarize(rows, gate_only=True)
    assert list(summary) == list(counts) == RETRIEVAL_METRICS
    assert summary["recall@1"] == 1.0


def test_retrieval_metrics_are_none_without_positives(make_row) -> None:
    summary, counts = summarize([make_row("n1", kind="negative", retrieved=["a#"])], gate_only=True)
    assert all(value is None for value in summary.values())
    assert all(n == 0 for n in counts.values())


def test_values_are_plain_python_numbers(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], answer="x", latency_ms=2.0,
                     stages_ms={"model": 1.5})]
    summary, _ = summarize(rows)
    assert all(type(v) in (float, int, type(None)) for v in summary.values())


def test_per_record_is_long_form_and_averages_back_to_the_summary(make_row) -> None:
    rows = [
        make_row("p1", gold=["a#"], retrieved=["b#", "a#"], hallucinated=["9"], latency_ms=5.0),
        make_row("p2", gold=["a#"], retrieved=["a#"]),
        make_row("n1", kind="negative", refused=True, refused_by="model"),
    ]
    long = per_record(rows)
    assert {"id": "p1", "metric": "mrr", "value": 0.5} in long
    assert {"id": "p1", "metric": "hallucinated_citations", "value": 1} in long
    assert {"id": "n1", "metric": "negatives_caught", "value": 1.0} in long
    # Only rows inside a metric's population appear under it.
    assert not any(r["id"] == "n1" and r["metric"] == "mrr" for r in long)
    # Run-level numbers (percentiles, bounds) have no per-record line.
    assert not any(r["metric"] in ("latency_p50", "over_refusal_gate_upper95") for r in long)
    summary, _ = summarize(rows)
    mrr = [r["value"] for r in long if r["metric"] == "mrr"]
    assert sum(mrr) / len(mrr) == pytest.approx(summary["mrr"])


def test_per_record_gate_only_lists_retrieval_only(make_row) -> None:
    long = per_record([make_row("p1", gold=["a#"], retrieved=["a#"])], gate_only=True)
    assert [r["metric"] for r in long] == RETRIEVAL_METRICS


# Regression: errored turns were scored, so a run whose every turn failed reported answer_f1 0.000.
def test_errored_rows_are_left_out_of_the_answer_averages(make_row) -> None:
    rows = [
        make_row("p1", gold=["a#"], answer="", gold_answer="use a token", identifiers=["token"], error="HTTP 500"),
        make_row("p2", gold=["a#"], answer="", gold_answer="use a token", identifiers=["token"], error="cut"),
    ]
    summary, counts = summarize(rows)
    assert summary["answer_f1"] is None and summary["identifier_recall"] is None
    assert summary["citation_recall"] is None and summary["errors"] == 2
    assert counts["answer_f1"] == 0


def _mixed_rows(make_row) -> list:
    return [
        make_row("p1", gold=["a#"], retrieved=["a#", "b#"], answer="The port is 8080 [1].", gold_answer="port 8080",
                 markers=["1"], latency_ms=210.0, identifiers=["8080"], tags=["ports"]),
        make_row("p2", gold=["b#"], retrieved=["c#"], answer="Use the --json flag.", gold_answer="pass --json",
                 latency_ms=190.0, tags=["ports", "flags"]),
        make_row("n1", kind="negative", retrieved=["a#"], answer="", refused=True, latency_ms=50.0),
        make_row("p3", gold=["c#"], retrieved=["c#"], error="HTTP 500 from the model", tags=["flags"]),
    ]


def test_values_worked_out_ahead_give_the_same_summary(make_row) -> None:
    from docpilot.metrics.slices import slice_by_tag
    from docpilot.metrics.summary import Ahead

    rows = _mixed_rows(make_row)
    ahead = Ahead()
    ahead.add(rows[:2])  # as a run does, shard by shard: the rest are worked out at the end
    assert summarize(rows, ahead=ahead) == summarize(rows)
    ahead.add(rows[2:])
    assert summarize(rows, ahead=ahead) == summarize(rows)
    assert slice_by_tag(rows, ahead=ahead) == slice_by_tag(rows)


def test_a_value_worked_out_ahead_belongs_to_its_row_object_only(make_row) -> None:
    from docpilot.metrics.summary import Ahead

    rows = _mixed_rows(make_row)
    ahead = Ahead()
    ahead.add(rows)
    # A copy with another answer (as a report's rows are copied to redact an error) is scored afresh.
    changed = [rows[0].model_copy(update={"answer": "Nothing about it."}), *rows[1:]]
    assert summarize(changed, ahead=ahead) == summarize(changed)
    assert summarize(changed, ahead=ahead)[0]["answer_f1"] != summarize(rows, ahead=ahead)[0]["answer_f1"]
    ahead.clear()
    assert summarize(rows, ahead=ahead) == summarize(rows)


def test_every_retrieval_metric_is_computed_by_the_batch_never_row_by_row() -> None:
    # Regression: the batch was keyed on the positives' population; when the retrieval metrics moved to
    # the ranked positives, every row was scored one by one (10x slower) and every number stayed right.
    from docpilot.metrics.summary import _batched

    assert RETRIEVAL_METRICS and all(_batched(METRICS[name]) for name in RETRIEVAL_METRICS)


def test_the_batch_and_each_row_s_own_score_agree_at_section_and_page_level(make_row) -> None:
    rows = [
        make_row("s1", gold=["guide/auth#tokens"], retrieved=["guide/deploy#ci", "guide/auth#tokens"]),
        make_row("p1", gold=["guide/auth#tokens", "guide/auth#rotate"], retrieved=["index", "guide/auth"]),
        make_row("p2", gold=["guide"], retrieved=["guide/auth#x", "guide/deploy", "guide/auth"]),
        make_row("o1", gold=["index#install"], retrieved=["blog/post#", "index#install"]),
    ]
    summary, _ = summarize(rows)
    for name in RETRIEVAL_METRICS:
        by_row = [METRICS[name].score(row) for row in rows]
        assert summary[name] == pytest.approx(sum(by_row) / len(by_row)), name
    assert METRICS["mrr"].score(rows[1]) == 0.5  # page level: guide/auth at rank 2 holds both gold sections
    assert METRICS["recall@8"].score(rows[1]) == 1.0
    assert METRICS["ndcg@8"].score(rows[1]) == pytest.approx((1 / 1.5849625007211562) / 1.0)
