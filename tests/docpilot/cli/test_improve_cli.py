"""`docpilot improve [REPORT]` and `docpilot improve compare A B`: parsing, output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.reports.report import score, write_report
from docpilot.schema import Report, Row

DOCS = Path(__file__).resolve().parents[2] / "data" / "improve" / "docs"
RUN_A = "20260101T000000Z-aaaaaa"
RUN_B = "20260102T000000Z-bbbbbb"


def _rows(*, fixed: bool) -> list[Row]:
    renew = Row(id="renew", kind="positive", split="test", question="How do I renew my credentials?",
                gold=["guide/tokens#rotate"], retrieved=["guide/tokens#rotate"] if fixed else [],
                primed=["guide/tokens#rotate"] if fixed else [], answer="REFUSE: not-answerable", refused=True,
                refused_by="model", gold_answer="Run acme token rotate.")
    phone = Row(id="phone", kind="negative", split="test", question="Is there a phone line?",
                retrieved=["index#support"], scores=[2.6], primed=["index#support"],
                answer="Report problems on the issue tracker. [1]", markers=["1"], citations=["index#support"],
                sources_shown=["index#support"], links=1, language="en", answer_language="en")
    return [renew, phone]


def _save(folder: Path, run_id: str, *, fixed: bool) -> Path:
    rows = _rows(fixed=fixed)
    summary, counts, gates, verdict = score(rows, {}, gate_only=False)
    report = Report(run_id=run_id, created_at="2026-01-01T00:00:00+00:00", config={"corpus": {"docs": str(DOCS)}},
                    fingerprints={"golden": "g", "config": "fixed" if fixed else "base"}, split="test",
                    rows=rows, summary=summary, counts=counts, gates=gates, verdict=verdict)
    return write_report(report, folder / f"{run_id}.json")


@pytest.fixture()
def reports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "reports"  # where the test-wide DOCPILOT_REPORTS_DIR points
    folder.mkdir()
    return folder


def _improve(*args: str):
    return CliRunner().invoke(main, ["improve", *args])


def test_improve_a_report_file(reports):
    path = _save(reports, RUN_A, fixed=False)
    result = _improve(str(path))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"run {RUN_A} (test split): 2 of 2 records failing" in out
    assert "not-retrieved" in out and "answered-negative" in out
    # Test records choose no vocabulary entry; neither word is related to the gold section's, so no
    # heading is asked to carry them: the edit says so, and to check the gold.
    assert "try (vocabulary)" not in out and "try (heading)" not in out
    assert "lacks (renew, credentials) are related to none of its own" in out
    assert "guard.threshold" in out


def test_improve_defaults_to_the_last_report_and_takes_run_ids(reports):
    _save(reports, RUN_A, fixed=False)
    _save(reports, RUN_B, fixed=True)
    assert f"run {RUN_B}" in _improve().stdout
    assert f"run {RUN_A}" in _improve(RUN_A).stdout
    by_id = json.loads(_improve(RUN_A, "--json").stdout)
    assert by_id["report"]["path"] == str(reports / f"{RUN_A}.json")


def test_options_before_or_after_the_report(reports):
    path = str(_save(reports, RUN_A, fixed=False))
    for args in (["--json", path], [path, "--json"]):
        result = _improve(*args)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert set(data) == {"report", "assistant", "records", "failing", "causes", "failures", "notes", "warnings",
                             "vocabulary", "settings"}
        assert data["assistant"] == {"kind": "docpilot", "name": None}
        assert data["causes"] == {"not-retrieved": 1, "answered-negative": 1}
        failure = data["failures"][0]
        assert set(failure) == {"id", "kind", "split", "question", "cause", "also", "detail", "moves", "edits",
                                "languages"}
        assert failure["edits"][0]["kind"] == "docs"
        assert set(failure["edits"][0]) == {"kind", "target", "change", "value", "effect"}


def test_improve_without_docs_still_diagnoses(reports, tmp_path):
    path = str(_save(reports, RUN_A, fixed=False))
    result = _improve(path, "--docs", str(tmp_path / "nowhere"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failing"] == 2 and "not found" in data["notes"][0]


@pytest.mark.parametrize("args", [["missing.json"], ["no-such-run"], ["compare", "missing.json", "x.json"]])
def test_a_bad_report_is_exit_2_with_a_clear_message(reports, args):
    result = _improve(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "Traceback" not in result.output
    assert "no such report" in result.stderr or "no run" in result.stderr


def test_a_file_that_is_not_a_report_is_exit_2(reports, tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}', encoding="utf-8")
    result = _improve(str(tmp_path / "notes.json"))
    assert result.exit_code == 2 and "not a DocPilot report" in result.stderr


def test_no_report_at_all_is_exit_2(reports):
    result = _improve()
    assert result.exit_code == 2 and "no readable report" in result.stderr


def test_compare_two_runs(reports):
    a, b = _save(reports, RUN_A, fixed=False), _save(reports, RUN_B, fixed=True)
    result = _improve("compare", str(a), str(b))
    assert result.exit_code == 0, result.output
    out = result.stdout.replace("\n", " ")
    assert "recall@8" in out and "mcnemar" in out and "wilcoxon" in out
    assert "recall@8 better in B: renew (0.00→1.00)" in out
    assert "prove on test, choose on dev" in out
    assert "no dev-split run of B's settings" in out


def test_compare_json_by_run_id(reports):
    _save(reports, RUN_A, fixed=False)
    _save(reports, RUN_B, fixed=True)
    result = _improve("compare", RUN_A, RUN_B, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"a", "b", "records", "only_a", "only_b", "changed", "settings", "pages", "warnings", "tests"}
    assert data["a"]["run_id"] == RUN_A and data["changed"] == ["config"]
    assert data["b"]["path"] == str(reports / f"{RUN_B}.json")
    hit = next(t for t in data["tests"] if t["outcome"] == "recall@8")
    assert (hit["n"], hit["b"], hit["c"], hit["p_value"]) == (1, 0, 1, 1.0)
    assert hit["better"] == [{"id": "renew", "a": 0.0, "b": 1.0}]


def test_compare_with_fewer_than_two_reports_takes_the_newest_runs(reports):
    # With no run in the folder there is nothing to fill in: one line says what to do.
    result = _improve("compare", "only-one.json")
    assert result.exit_code == 2 and "no report in" in result.stderr and "improve compare A B" in result.stderr
    _save(reports, RUN_A, fixed=False)
    _save(reports, RUN_B, fixed=True)
    for args in (("compare",), ("compare", RUN_A)):
        result = _improve(*args)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"A: run {RUN_A} (") and f"B: run {RUN_B} (" in result.stdout


def test_two_reports_without_compare_is_a_usage_error(reports):
    result = _improve("a.json", "b.json")
    assert result.exit_code == 2
    assert "improve [OPTIONS] [REPORT] [CAUSE...]\n" in result.stderr and "one report at a time" in result.stderr


def test_help_names_both_forms():
    result = _improve("--help")
    assert result.exit_code == 0
    assert "[REPORT] [CAUSE...] | compare [A [B]]" in result.stdout and "--apply" in result.stdout


def test_improve_warns_when_it_reads_test_records_and_shows_languages(reports):
    path = _save(reports, RUN_A, fixed=False)  # both records are on the test split
    result = _improve(str(path))
    assert result.exit_code == 0, result.output
    assert "warning: 2 of the 2 records are from the test split: choose edits on dev" in result.stderr
    assert "language: expected en; detected: question ?, answer en" in result.stdout  # phone
    data = json.loads(_improve(str(path), "--json").stdout)
    assert data["warnings"][0].startswith("2 of the 2 records are from the test split")
    phone = next(f for f in data["failures"] if f["id"] == "phone")
    assert phone["languages"] == {"expected": "en", "question": None, "answer": "en"}


# Regression: improve printed a record id's terminal escapes raw (an OSC title change, a screen clear).
def test_control_characters_in_data_are_shown_not_obeyed(reports):
    rows = _rows(fixed=False)
    hostile = "\x1b]0;owned\x07\x1b[2Jphone"
    rows[1] = rows[1].model_copy(update={"id": hostile, "question": "Is there a \x1b[8mphone\x1b[0m line?"})
    summary, counts, gates, verdict = score(rows, {}, gate_only=False)
    report = Report(run_id=RUN_A, created_at="2026-01-01T00:00:00+00:00", config={"corpus": {"docs": str(DOCS)}},
                    fingerprints={"golden": "g", "config": "base"}, split="test",
                    rows=rows, summary=summary, counts=counts, gates=gates, verdict=verdict)
    path = write_report(report, reports / f"{RUN_A}.json")
    result = _improve(str(path))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2Jphone" in result.stdout


def test_clean_keeps_text_and_line_breaks():
    from docpilot.reports.terminal import clean

    assert clean("naïve\tline\nnext — ok") == "naïve\tline\nnext — ok"
    assert clean("a\rb\x9bc\u202ed") == "a\\x0db\\x9bc\\u202ed"
