"""`docpilot status`: the last run, its moves since the last comparable run, exit codes and --json."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.reports.report import score, write_report
from docpilot.schema import Report, Row


def _rows(hits: int) -> list[Row]:
    return [Row(id=f"q{i}", kind="positive", split="dev", question="?", gold=["p#gold"],
                retrieved=["p#gold"] if i < hits else ["p#other"]) for i in range(4)]


def _save(folder, run_id: str, hits: int, *, split: str = "dev") -> Report:
    rows = _rows(hits)
    summary, counts, gates, verdict = score(rows, {"recall@8": ">= 0.5"}, gate_only=True)
    report = Report(run_id=run_id, created_at=f"2026-01-0{run_id[7]}T00:00:00+00:00", config={},
                    fingerprints={"golden": "g"}, split=split, gate_only=True, rows=rows, summary=summary,
                    counts=counts, gates=gates, verdict=verdict)
    write_report(report, folder / f"{run_id}.json")
    return report


@pytest.fixture()
def reports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config file is picked up from the checkout
    folder = tmp_path / "reports"  # where the test-wide DOCPILOT_REPORTS_DIR points
    folder.mkdir()
    return folder


def _status(*args: str):
    return CliRunner().invoke(main, ["status", *args])


def test_no_report_is_exit_2_with_a_clear_message(reports):
    result = _status()
    assert result.exit_code == 2
    assert "no readable report" in result.stderr and "docpilot eval" in result.stderr


def test_one_run_says_there_is_no_previous_comparable_run(reports):
    _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    result = _status()
    assert result.exit_code == 0, result.output
    assert "recall@8" in result.stdout and "0.500" in result.stdout
    assert "no previous comparable run" in result.stdout.replace("\n", " ")


def test_moves_since_the_previous_comparable_run(reports):
    _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    _save(reports, "20260102T000000Z-bbbbbb", hits=1, split="test")  # not comparable: skipped
    _save(reports, "20260103T000000Z-cccccc", hits=3)
    result = _status()
    assert result.exit_code == 0, result.output
    out = result.stdout.replace("\n", " ")
    assert "+0.250 ↑" in out and "better" in out and "↓ worse" not in out
    assert "compared run 20260103T000000Z-cccccc" in out and "with run 20260101T000000Z-aaaaaa" in out
    assert "passed over runs that differ: 20260102T000000Z-bbbbbb (test" in out


def test_json_shape(reports):
    _save(reports, "20260101T000000Z-aaaaaa", hits=4)
    _save(reports, "20260102T000000Z-bbbbbb", hits=3)
    result = _status("--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"report", "previous", "compared", "metrics", "gates", "verdict", "drift", "skipped"}
    assert data["report"]["run_id"] == "20260102T000000Z-bbbbbb"
    assert data["previous"]["run_id"] == "20260101T000000Z-aaaaaa"
    recall = data["metrics"]["recall@8"]
    assert recall == {"value": 0.75, "n": 4, "previous": 1.0, "delta": -0.25, "floor": 0.25, "direction": "down",
                      "change": "worse"}
    assert data["gates"][0]["metric"] == "recall@8" and data["verdict"] == "pass"


def test_reports_folder_from_the_flag_and_the_config(reports, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    _save(other, "20260101T000000Z-aaaaaa", hits=1)
    assert _status("--reports", str(other), "--json").exit_code == 0
    monkeypatch.delenv("DOCPILOT_REPORTS_DIR")
    config = tmp_path / "c.yaml"
    config.write_text(f"reports_dir: {other}\n", encoding="utf-8")
    result = _status("--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["report"]["run_id"] == "20260101T000000Z-aaaaaa"


def test_an_unreadable_report_is_a_warning_not_a_failure(reports):
    _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    (reports / "20260109T000000Z-broken.json").write_text("{", encoding="utf-8")
    result = _status()
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "broken" in result.stderr


def test_a_change_below_the_noise_floor_is_no_move(reports):
    # Regression: `stage_retrieve_p50 +0.00 ms ↓ worse` was shown for a sub-millisecond change.
    before = _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    after = before.model_copy(update={"run_id": "20260102T000000Z-bbbbbb", "created_at": "2026-01-02T00:00:00+00:00",
                                      "summary": {**before.summary, "stage_retrieve_p50": 0.004,
                                                  "latency_p50": 1000.0, "recall@8": 0.5 + 0.1}})
    write_report(before.model_copy(update={"summary": {**before.summary, "stage_retrieve_p50": 0.002,
                                                       "latency_p50": 950.0}}),
                 reports / "20260101T000000Z-aaaaaa.json")
    write_report(after, reports / "20260102T000000Z-bbbbbb.json")
    data = json.loads(_status("--json").stdout)["metrics"]
    # 0.002 ms on a 1 ms floor, 50 ms on a 95 ms floor (10 %), 0.1 on one record's worth (1/4): none moved
    for metric in ("stage_retrieve_p50", "latency_p50", "recall@8"):
        assert (data[metric]["direction"], data[metric]["change"]) == ("same", "same"), metric
    out = " ".join(_status().stdout.split())
    assert "+0.00 ms" not in out and "worse" not in out and "= no move" in out
    assert "a move is shown only beyond its noise floor" in out


def test_direction_and_verdict_are_apart_for_times(reports):
    before = _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    write_report(before.model_copy(update={"summary": {**before.summary, "latency_p50": 100.0}}),
                 reports / "20260101T000000Z-aaaaaa.json")
    after = before.model_copy(update={"run_id": "20260102T000000Z-bbbbbb", "created_at": "2026-01-02T00:00:00+00:00",
                                      "summary": {**before.summary, "latency_p50": 150.0}})
    write_report(after, reports / "20260102T000000Z-bbbbbb.json")
    latency = json.loads(_status("--json").stdout)["metrics"]["latency_p50"]
    assert (latency["direction"], latency["change"], latency["floor"]) == ("up", "worse", 10.0)
    line = next(line for line in _status().stdout.splitlines() if "latency_p50" in line)
    assert "+50 ms ↑" in line and "worse" in line


# Regression: a deeply nested *.json in the reports folder crashed status.
def test_a_deeply_nested_json_in_the_folder_is_skipped_with_a_warning(reports):
    _save(reports, "20260101T000000Z-aaaaaa", hits=2)
    (reports / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (reports / "deep-rows.json").write_text('{"rows": []' + ', "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    result = _status()
    assert result.exit_code == 0, result.output
    assert "deep.json: skipped" in result.stderr and "Traceback" not in result.output
