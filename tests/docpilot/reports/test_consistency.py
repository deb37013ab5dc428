"""`docpilot score` refuses a report no run could have written."""

from __future__ import annotations

import gc
import json

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("consistency") / "report.json"
    result = CliRunner().invoke(main, ["eval", *BASE, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def _score(tmp_path, report: dict, *, raw: str | None = None):
    path = tmp_path / "edited.json"
    path.write_text(raw if raw is not None else json.dumps(report))
    return CliRunner().invoke(main, ["score", str(path)])


# Regression: `"gate_only": true` on a full report with error rows made `score` print pass.
def test_a_full_report_marked_gate_only_is_refused(tmp_path, full_report):
    edited = dict(full_report, gate_only=True)
    edited["rows"] = [dict(row, error="HTTP 500 from the model") for row in full_report["rows"]]
    result = _score(tmp_path, edited)
    assert result.exit_code == 2, result.output
    assert "gate-only report" in result.stderr and "edited.json" in result.stderr and "fix:" in result.stderr


# Regression: Infinity and negative latencies were accepted.
@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "-5.0"])
def test_times_that_are_not_finite_or_are_negative_are_refused(tmp_path, full_report, value):
    edited = json.loads(json.dumps(full_report))
    edited["rows"][0]["latency_ms"] = "__TIME__"
    result = _score(tmp_path, {}, raw=json.dumps(edited).replace('"__TIME__"', value))  # JSON as Python writes it
    assert result.exit_code == 2, result.output
    assert "times are finite and not negative" in result.stderr


# Regression: `score` accepted a row ranking one section twice, which context precision counts twice
# and recall and nDCG once.
def test_a_section_repeated_in_retrieved_is_refused_naming_the_report_and_the_record(tmp_path, full_report):
    edited = json.loads(json.dumps(full_report))
    row = next(r for r in edited["rows"] if len(r["retrieved"]) >= 2)
    row["retrieved"] = [*row["retrieved"], row["retrieved"][0]]
    row["scores"] = [*row["scores"], row["scores"][0]]
    result = _score(tmp_path, edited)
    assert result.exit_code == 2, result.output
    assert "edited.json" in result.stderr and f"record {row['id']!r}" in result.stderr
    assert f"section {row['retrieved'][0]!r} more than once in retrieved" in result.stderr
    assert "fix:" in result.stderr and "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("field", ["first_thought_ms", "stages_ms"])
def test_a_bad_time_anywhere_in_a_row_is_refused_by_its_name(tmp_path, full_report, field):
    edited = json.loads(json.dumps(full_report))
    row = edited["rows"][-1]
    if field == "stages_ms":
        row["stages_ms"] = {**row["stages_ms"], "retrieve": "__TIME__"}
    else:
        row[field] = "__TIME__"
    result = _score(tmp_path, {}, raw=json.dumps(edited).replace('"__TIME__"', "NaN"))
    assert result.exit_code == 2, result.output
    name = "stages_ms.retrieve" if field == "stages_ms" else field
    assert f"record {row['id']!r} has {name} = nan; times are finite and not negative" in result.stderr


def test_an_untouched_report_still_scores(tmp_path, full_report):
    assert _score(tmp_path, full_report).exit_code == 0


def test_scoring_leaves_pythons_cycle_collector_as_it_found_it(tmp_path, full_report):
    # `score` reads and rescores with the collector paused; a caller in the same process
    # (this test's, a notebook's) gets it back as it was, after a verdict or a refusal.
    assert gc.isenabled()
    assert _score(tmp_path, full_report).exit_code == 0 and gc.isenabled()
    assert _score(tmp_path, {}, raw="{").exit_code == 2 and gc.isenabled()
    gc.disable()
    try:
        assert _score(tmp_path, full_report).exit_code == 0 and not gc.isenabled()
    finally:
        gc.enable()
