"""The terminal scorecard of a run of several variants (docpilot/reports/matrix.py)."""

from __future__ import annotations

from rich.console import Console

from docpilot.reports.matrix import render_matrix
from tests.support.repeated_variants import repeated_variants


def _printed(report) -> str:
    console = Console(record=True, width=200, color_system=None)
    render_matrix(report, console)
    return console.export_text()


def test_each_variant_shows_its_intervals_by_page_and_names_its_flaky_records():
    report = repeated_variants()
    text = _printed(report)
    assert "2 variants × 8 records" in text  # records, not samples
    for variant in report.variants:
        low, high = variant.intervals["recall@8"]
        assert f"{variant.summary['recall@8']:.3f} [{low:.3f}, {high:.3f}]" in text
    assert "shaky: samples: 3 per record, 8 records; flip rate 0.250 (2 flaky), pass^3 0.750" in text
    assert "base: samples: 3 per record, 8 records; flip rate 0.000 (0 flaky), pass^3 1.000" in text
    assert "    q1: 2 of 3 samples passed, answer F1" in text and "    q2: 2 of 3 samples passed" in text
    assert text.count("flaky records (2)") == 1


def test_a_run_of_one_sample_per_record_says_nothing_of_stability():
    report = repeated_variants()
    report = report.model_copy(update={"variants": [v.model_copy(update={"stability": None})
                                                    for v in report.variants]})
    assert "samples:" not in _printed(report) and "flaky" not in _printed(report)
