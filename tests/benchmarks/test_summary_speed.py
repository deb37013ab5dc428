"""The summary benchmark's own check: on its generated report, the summary equals pytrec_eval's means exactly."""

from __future__ import annotations

import pytest

from benchmarks.summary_speed import make_rows, measure

pytestmark = pytest.mark.slow


def test_the_generated_report_mixes_kinds_and_scores_like_pytrec_eval():
    rows = make_rows(400)
    assert {row.kind for row in rows} == {"positive", "negative", "attack"}
    result = measure(400, repeat=1)
    assert result["values_identical"], result["mismatched"]
    assert result["queries"] == sum(1 for row in rows if row.kind == "positive")
