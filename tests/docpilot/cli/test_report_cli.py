"""`docpilot report`: which files it writes, where, and its exit codes."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def saved(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    return shutil.copy(SMALL, folder / "small.json")


def test_with_no_output_option_the_html_goes_next_to_the_report(saved):
    result = run("report", str(saved))
    assert result.exit_code == 0, result.output
    page = saved.parent / "small.html"
    assert result.stdout.strip() == f"html: {page}"
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in saved.parent.iterdir()) == ["small.html", "small.json"]  # no temp files


def test_each_output_option_writes_its_file(saved, tmp_path):
    out = tmp_path / "out"
    result = run("report", str(saved), "--html", str(out / "r.html"), "--junit", str(out / "junit.xml"),
                 "--markdown", str(out / "summary.md"))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"html: {out / 'r.html'}", f"junit: {out / 'junit.xml'}",
                                          f"markdown: {out / 'summary.md'}"]
    assert ET.parse(out / "junit.xml").getroot().tag == "testsuites"
    assert (out / "summary.md").read_text(encoding="utf-8").startswith("### ❌ DocPilot: FAIL")
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "r.html", "summary.md"]
    assert not (saved.parent / "small.html").exists()  # only what was asked for


def test_markdown_dash_prints_the_summary_alone_on_stdout(saved, tmp_path):
    result = run("report", str(saved), "--markdown", "-", "--junit", str(tmp_path / "j.xml"))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("### ❌ DocPilot: FAIL") and "junit:" not in result.stdout
    assert f"junit: {tmp_path / 'j.xml'}" in result.stderr


def test_the_previous_comparable_run_is_looked_for_in_the_reports_folder(saved, tmp_path):
    older = tmp_path / "store" / "20261129T080000Z-aaaaaa.json"
    older.parent.mkdir()
    older.write_text(saved.read_text(encoding="utf-8").replace("20261130T120000Z-abc123", "20261129T080000Z-aaaaaa")
                     .replace("2026-11-30T12:00:00+00:00", "2026-11-29T08:00:00+00:00"), encoding="utf-8")
    result = run("report", str(saved), "--markdown", "-", "--reports", str(older.parent))
    assert result.exit_code == 0, result.output
    assert "Moves since run 20261129T080000Z-aaaaaa" in result.stdout


def test_a_missing_report_exits_2_with_a_message(tmp_path):
    result = run("report", str(tmp_path / "nope.json"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "nope.json: no such report" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_report_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": 1}')
    result = run("report", str(bad))
    assert result.exit_code == 2 and "not a DocPilot report" in result.stderr


def test_an_output_that_cannot_be_written_exits_2_and_leaves_no_partial_file(saved, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    result = run("report", str(saved), "--html", str(blocker / "r.html"))
    assert result.exit_code == 2
    assert "is not a folder" in result.stderr
    assert blocker.read_text() == "a file, not a folder"
