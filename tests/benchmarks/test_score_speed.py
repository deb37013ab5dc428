"""The score benchmark's own check: its three commands run on a generated report and give their figures."""

from __future__ import annotations

import pytest

from benchmarks.score_speed import measure

pytestmark = pytest.mark.slow


def test_score_the_script_and_the_checked_load_each_run_and_give_a_ratio():
    figures = measure(200, repeat=1)
    assert figures["rows"] == 200 and len(figures["score_runs_s"]) == len(figures["pytrec_runs_s"]) == 1
    assert figures["checked_load_s"] > 0 and figures["score_s"] > 0  # one run each: no order to hold between them
    assert figures["floor_ratio"] == pytest.approx(figures["checked_load_s"] / figures["load_and_pytrec_s"], rel=0.03)
