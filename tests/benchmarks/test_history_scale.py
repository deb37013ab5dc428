"""The history benchmark at a tiny size: it writes valid reports, rebuilds the index and times the command."""

from __future__ import annotations

import pytest

from benchmarks import history_scale

pytestmark = pytest.mark.slow


def test_the_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    figures = history_scale.main(["--runs", "4", "--records", "10", "--repeat", "1", "--folder",
                                  str(tmp_path / "reports"), "--json"])
    assert figures["runs"] == 4 and figures["records"] == 10 and not figures["targets_apply"]
    assert figures["rebuild_s"] > 0 and figures["history_median_s"] > 0
    assert '"history_median_s"' in capsys.readouterr().out
