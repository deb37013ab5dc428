"""`docpilot history` and the drift line of `docpilot status`, over series of stored runs built night by night."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.support.run_series import night_report, write_night, write_series, write_slide


@pytest.fixture()
def reports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config file is picked up from the checkout
    return tmp_path / "reports"


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _changes(folder):
    """Nine nights: the docs change on night 3, the config on night 5, the model on night 7."""
    folder.mkdir(parents=True, exist_ok=True)
    for night in range(9):
        misses = frozenset(range(0, 40, 5)) if night >= 3 else frozenset()
        top_k = 2 if night >= 5 else 5
        lost = {i: 4 for i in range(40) if i % 5 != 4} if night >= 7 else {}
        write_night(folder, night_report(night, records=40, misses=misses, pages_changed=(0,) if night >= 3 else (),
                                         top_k=top_k, model="extractive-v2" if night >= 7 else "extractive-v1",
                                         lost_words=lost))


def test_moves_are_marked_at_the_night_they_happened_with_what_changed(reports):
    _changes(reports)
    result = _run("history", "recall@8", "answer_f1", "--json", "--reports", str(reports))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["runs"]) == 9 and data["metrics"] == ["recall@8", "answer_f1"]
    moved = {m["run_id"][-2:]: m for m in data["moves"]}
    assert sorted(moved) == ["03", "07"]  # night 5 changed a setting that moved neither metric
    docs = moved["03"]
    assert docs["metrics"]["recall@8"]["change"] == "worse"
    assert docs["cause"]["changed"] == ["corpus"] and docs["cause"]["pages"]["changed"] == ["guide/page0"]
    model = moved["07"]
    assert model["metrics"]["answer_f1"]["change"] == "worse"
    assert model["cause"]["model"] == ["extractive/extractive-v1", "extractive/extractive-v2"]
    assert {"key": "model.name", "a": "extractive-v1", "b": "extractive-v2"} in model["cause"]["settings"]


def test_the_terminal_shows_sparklines_marks_and_causes_in_compare_wording(reports):
    _changes(reports)
    result = _run("history", "recall@8", "answer_f1", "--reports", str(reports))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "9 of 9 comparable runs" in out
    assert any(ch in out for ch in "▁▂▃▄▅▆▇█")
    assert "#4 run 20261004T020000Z-000003" in out and "recall@8 −0.250 ↓ worse" in out
    assert "changed between the runs: corpus" in out and "docs: pages changed: guide/page0" in out
    assert "model extractive/extractive-v1 → extractive/extractive-v2" in out
    assert "setting model.name extractive-v1 → extractive-v2" in out


def test_the_markdown_names_each_move_and_its_cause(reports):
    _changes(reports)
    result = _run("history", "recall@8", "--markdown", "--reports", str(reports))
    assert result.exit_code == 0, result.output
    assert "| `recall@8` | 1.000 | 0.750 |" in result.stdout
    assert "- **run 20261004T020000Z-000003**" in result.stdout
    assert "  - docs: pages changed: guide/page0" in result.stdout


def test_last_and_since_cut_the_window_but_moves_still_compare_with_the_run_before(reports):
    _changes(reports)
    result = _run("history", "recall@8", "--json", "--last", "6", "--reports", str(reports))
    data = json.loads(result.stdout)
    assert [r["run_id"][-2:] for r in data["runs"]] == ["03", "04", "05", "06", "07", "08"]
    assert [m["run_id"][-2:] for m in data["moves"]] == ["03"]
    result = _run("history", "recall@8", "--json", "--since", "2026-10-07", "--reports", str(reports))
    assert [r["run_id"][-2:] for r in json.loads(result.stdout)["runs"]] == ["06", "07", "08"]


def test_a_changed_golden_set_starts_a_new_series(reports):
    write_series(reports, 3, records=20)
    write_night(reports, night_report(5, records=20, golden="h" * 64))
    result = _run("history", "recall@8", "--json", "--reports", str(reports))
    data = json.loads(result.stdout)
    assert len(data["runs"]) == 1 and data["series"]["golden"] == "h" * 64
    assert any("3 run(s) of other series left out" in note for note in data["notes"])


def test_bad_input_is_one_line_and_exit_2(reports):
    assert "no readable report" in _run("history", "--reports", str(reports)).stderr
    write_series(reports, 2, records=10)
    unknown = _run("history", "recall@9", "--reports", str(reports))
    assert unknown.exit_code == 2 and "recall@9" in unknown.stderr and "recall@8" in unknown.stderr
    bad_date = _run("history", "--since", "last week", "--reports", str(reports))
    assert bad_date.exit_code == 2 and "YYYY-MM-DD" in bad_date.stderr
    both = _run("history", "--json", "--markdown", "--reports", str(reports))
    assert both.exit_code == 2
    for result in (unknown, bad_date, both):
        assert "Traceback" not in result.output


def test_a_truncated_report_is_skipped_with_one_warning_and_history_goes_on(reports):
    paths = write_series(reports, 3, records=10)
    paths[1].write_text(paths[1].read_text()[:300])
    result = _run("history", "--reports", str(reports))
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning:") == 1 and paths[1].name in result.stderr
    assert "2 of 2 comparable runs" in result.stdout


def test_a_slow_slide_no_night_shows_is_flagged_as_drift(reports):
    write_slide(reports, 8)
    history = _run("history", "answer_f1", "--json", "--reports", str(reports))
    data = json.loads(history.stdout)
    assert data["moves"] == []  # no single night moved answer F1 past its floor
    assert data["drift"]["flagged"] and data["drift"]["worse"] == ["answer_f1"]
    assert data["drift"]["back"] == 7 and data["drift"]["base"] == data["runs"][0]["run_id"]
    status = _run("status", "--reports", str(reports))
    assert status.exit_code == 0, status.output
    lines = [line for line in status.stdout.splitlines() if "drift:" in line]
    assert len(lines) == 1 and "answer_f1" in lines[0] and "7 runs back" in lines[0]


def test_a_steady_series_has_no_drift_line(reports):
    write_series(reports, 9, records=40)
    status = _run("status", "--reports", str(reports))
    assert status.exit_code == 0, status.output
    assert "drift" not in status.stdout
    data = json.loads(_run("status", "--json", "--reports", str(reports)).stdout)
    assert data["drift"]["flagged"] is False and data["drift"]["back"] == 7


def test_drift_needs_enough_runs(reports):
    write_slide(reports, 4)
    data = json.loads(_run("history", "--json", "--reports", str(reports)).stdout)
    assert data["drift"]["base"] is None and "drift looks 7 runs back" in data["drift"]["note"]
    data = json.loads(_run("history", "--json", "--drift-back", "3", "--reports", str(reports)).stdout)
    assert data["drift"]["base"] == data["runs"][0]["run_id"]


def test_a_new_docpilot_version_is_named_at_the_move_it_came_with(reports):
    reports.mkdir(parents=True)
    write_night(reports, night_report(0, records=20))
    upgraded = night_report(1, records=20, misses=frozenset({0, 5, 10}))
    upgraded = upgraded.model_copy(update={"docpilot_version": "9.9.0",
                                           "fingerprints": {**upgraded.fingerprints, "code": "e" * 64}})
    write_night(reports, upgraded)
    data = json.loads(_run("history", "recall@8", "--json", "--reports", str(reports)).stdout)
    (move,) = data["moves"]
    assert move["cause"]["changed"] == ["code"] and move["cause"]["version"][1] == "9.9.0"
    assert move["cause"]["lines"][-1].startswith("DocPilot ") and move["cause"]["lines"][-1].endswith(" → 9.9.0")
