"""The report of a run of several variants (docpilot/reports/variants.py): paired verdict, Holm, re-scoring, one variant."""

from __future__ import annotations

import json
import random

import pytest

from docpilot.config.variants import Variant
from docpilot.errors import InputError
from docpilot.reports.report import rescore, write_report
from docpilot.reports.stats import holm
from docpilot.reports.variants import cheapest_of, join_variants, one_variant, paired_verdict, rescore_variants
from docpilot.schema import Report, Row
from tests.support.repeated_variants import FLAKY, repeated_variants, variant_report


@pytest.mark.slow
def test_holm_agrees_with_statsmodels():
    from statsmodels.stats.multitest import multipletests
    generator = random.Random(7)
    for size in (1, 2, 3, 5, 12, 40):
        for _ in range(4):
            ps = [generator.choice([generator.random(), generator.random() / 100, 1.0, 0.04]) for _ in range(size)]
            expected = multipletests(ps, method="holm")[1]
            assert holm(ps) == pytest.approx(list(expected), abs=1e-12)
    assert holm([]) == []


def test_holm_by_hand():
    # Sorted 0.01 < 0.02 < 0.04: 3 × 0.01, max(0.03, 2 × 0.02), max(0.04, 1 × 0.04); in the given order.
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])


def _row(i: int, hit: bool, *, variant: str | None = None, latency: float = 10.0) -> Row:
    return Row(id=f"q{i}", kind="positive", split="dev", question=f"question {i}?", gold=["a#x"],
               retrieved=["a#x"] if hit else ["b#y"], primed=["a#x"] if hit else ["b#y"],
               answer="an answer", latency_ms=latency, first_token_ms=latency / 2, variant=variant)


def _report(rows: list[Row], gates: dict | None = None) -> Report:
    report = Report(run_id="r", created_at="2026-01-01T00:00:00+00:00", config={"gates": gates or {}},
                    fingerprints={"model": "m", "config": "c", "corpus": "x"}, rows=rows, summary={}, gates=[],
                    verdict="pass")
    return rescore(report)


def _joined(hits: dict[str, list[bool]], gates: dict | None = None, **kwargs) -> Report:
    latency = {"base": 30.0, "same": 10.0, "better": 20.0, "worse": 5.0}
    parts = [(Variant(name), _report([_row(i, h, latency=latency.get(name, 1.0)) for i, h in enumerate(flags)],
                                     gates)) for name, flags in hits.items()]
    return join_variants(parts, **kwargs)


def test_variants_are_tested_against_the_baseline_and_the_p_values_corrected_together():
    from statsmodels.stats.multitest import multipletests
    n = 30
    base = [i % 2 == 0 for i in range(n)]  # 15 hits
    joined = _joined({"base": base, "same": base, "better": [True] * n, "worse": [False] * n})
    paired = joined.paired
    hit = {t.variant: t for t in paired.tests if t.outcome == "recall@8"}
    # "same" flips nothing: listed, but no test, so it does not grow the correction.
    assert hit["same"].p_holm is None and "not counted" in hit["same"].note
    tested = [t for t in paired.tests if t.p_holm is not None]
    assert [t.p_holm for t in tested] == pytest.approx(list(multipletests([t.p_value for t in tested],
                                                                          method="holm")[1]))
    assert hit["better"].direction == "better" and hit["better"].better == 15 and hit["better"].worse == 0
    assert hit["worse"].direction == "worse" and hit["worse"].worse == 15
    assert paired.better["recall@8"] == ["better"] and paired.worse["recall@8"] == ["worse"]
    assert paired.not_worse == ["base", "same", "better"]
    # No variant reports tokens or dollars: cheapest by median latency, among those not worse.
    assert (paired.cheapest_not_worse, paired.cheapest_by) == ("same", "latency_p50")


def test_cheapest_reads_dollars_first_then_tokens():
    summaries = {"a": {"cost_usd": 0.5, "prompt_tokens": 10, "latency_p50": 1},
                 "b": {"cost_usd": 0.2, "prompt_tokens": 99, "latency_p50": 9}}
    assert cheapest_of(["a", "b"], summaries) == ("b", "cost_usd")
    summaries = {"a": {"prompt_tokens": 10, "completion_tokens": 5, "latency_p50": 9},
                 "b": {"prompt_tokens": 99, "completion_tokens": 1, "latency_p50": 1}}
    assert cheapest_of(["a", "b"], summaries) == ("a", "tokens")


def test_the_verdict_fails_when_any_variant_fails_a_gate_unless_one_variant_is_named():
    n = 10
    gates = {"recall@8": ">= 0.9"}
    joined = _joined({"base": [True] * n, "worse": [False] * n}, gates)
    assert [v.verdict for v in joined.variants] == ["pass", "fail"] and joined.verdict == "fail"
    assert _joined({"base": [True] * n, "worse": [False] * n}, gates, gate_variant="base").verdict == "pass"


def test_score_recomputes_every_variant_and_the_paired_verdict_from_the_rows_alone(tmp_path):
    n = 20
    joined = _joined({"base": [i % 3 == 0 for i in range(n)], "better": [True] * n}, {"recall@8": ">= 0.5"})
    tampered = joined.model_copy(update={"variants": [v.model_copy(update={"summary": {}, "verdict": "pass"})
                                                      for v in joined.variants],
                                         "paired": joined.paired.model_copy(update={"tests": []}),
                                         "verdict": "pass"})
    again = rescore_variants(tampered)
    assert [v.summary for v in again.variants] == [v.summary for v in joined.variants]
    assert again.paired == joined.paired and again.verdict == joined.verdict == "fail"
    assert again.summary == joined.variants[0].summary  # the report's own numbers are the baseline's


def test_a_variant_reads_as_a_run_of_one_and_a_run_of_one_keeps_its_shape(tmp_path):
    n = 6
    joined = _joined({"base": [True] * n, "k3": [False] * n})
    k3 = one_variant(joined, "k3")
    assert k3.variants is None and len(k3.rows) == n and {r.variant for r in k3.rows} == {"k3"}
    assert k3.summary["recall@8"] == 0.0 and one_variant(joined).summary["recall@8"] == 1.0
    with pytest.raises(InputError, match="has no variant 'k9'.*\n  fix: its variants: base, k3"):
        one_variant(joined, "k9")
    single = _report([_row(i, True) for i in range(n)])
    with pytest.raises(InputError, match="run of one"):
        one_variant(single, "k3")
    # Written, a run of one has no variant fields; a run of several has them, at version 2.
    write_report(single, tmp_path / "one.json")
    data = json.loads((tmp_path / "one.json").read_text())
    assert data["schema_version"] == 1 and "variants" not in data and "paired" not in data
    assert all("variant" not in row for row in data["rows"])
    write_report(joined, tmp_path / "two.json")
    data = json.loads((tmp_path / "two.json").read_text())
    assert data["schema_version"] == 2 and [v["name"] for v in data["variants"]] == ["base", "k3"]
    assert [row["variant"] for row in data["rows"]] == ["base"] * n + ["k3"] * n


def test_the_paired_verdict_pairs_records_by_id():
    rows = [_row(0, True, variant="a"), _row(1, True, variant="a"), _row(1, False, variant="b")]
    paired = paired_verdict(rows, ["a", "b"], {"a": {}, "b": {}}, gate_only=True)
    hit = next(t for t in paired.tests if t.outcome == "recall@8")
    assert hit.n == 1 and hit.worse == 1


def test_outcomes_worked_out_ahead_are_those_worked_out_after_and_a_copy_is_worked_out_afresh():
    from docpilot.reports.compare import OutcomesAhead, outcome_scores

    rows = [_row(i, hit=i % 3 != 0) for i in range(12)]
    ahead = OutcomesAhead()
    ahead.add(rows[:6])
    ahead.add(rows[6:])
    assert outcome_scores(rows, ahead) == outcome_scores(rows)
    # A row copied with other sections retrieved is not the row its value came from.
    moved = rows[1].model_copy(update={"retrieved": ["nowhere#else"]})
    again = outcome_scores([moved, *rows[2:]], ahead)
    assert again == outcome_scores([moved, *rows[2:]])
    assert again["recall@8"][moved.id] == 0.0 and outcome_scores(rows)["recall@8"][moved.id] == 1.0


def test_each_variant_keeps_its_own_stability_and_intervals_through_join_score_and_reading_one():
    base, shaky = variant_report(), variant_report(FLAKY)
    joined = repeated_variants()
    steady, flaky = joined.variants
    assert steady.stability == base.stability and flaky.stability == shaky.stability
    assert steady.stability.flip_rate == 0.0 and steady.stability.flaky == []
    assert [r.id for r in flaky.stability.flaky] == list(FLAKY) and flaky.stability.flip_rate == 0.25
    assert all(r.pass_rate == pytest.approx(2 / 3) for r in flaky.stability.flaky)
    assert steady.intervals == base.intervals and flaky.intervals == shaky.intervals
    assert "recall@8" in flaky.intervals and flaky.intervals["recall@8"][0] < 0.5 < flaky.intervals["recall@8"][1]
    assert joined.stability == steady.stability and joined.intervals == steady.intervals  # the baseline's
    # `docpilot score` recomputes them from the rows; reading one variant gives its own.
    emptied = joined.model_copy(update={"variants": [v.model_copy(update={"stability": None, "intervals": {}})
                                                     for v in joined.variants]})
    again = rescore_variants(emptied)
    assert [(v.stability, v.intervals) for v in again.variants] == [(v.stability, v.intervals) for v in joined.variants]
    alone = one_variant(joined, "shaky")
    assert (alone.stability, alone.intervals) == (flaky.stability, flaky.intervals)
