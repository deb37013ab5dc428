"""The by-turn table in the HTML report (read in a real headless Chromium) and the Markdown summary: present for
a run of conversations, as its report holds the slices, and absent for a run of single questions."""

from __future__ import annotations

import pytest

from docpilot.readout.files import write_outputs
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.reports.scorecard import format_value, headline_metrics
from tests.support.turn_reports import SMALL, conversation_report

ROWS = "Array.from(document.querySelectorAll('#turns tbody tr')).map((tr) => " \
       "Array.from(tr.cells).map((td) => td.textContent))"
HEADS = "Array.from(document.querySelectorAll('#turns thead th')).map((th) => th.textContent)"


@pytest.fixture
def written(tmp_path):
    """A report of conversations on disk, read back, and its HTML and Markdown readouts written as `docpilot report`
    writes them."""
    report = load_report(write_report(conversation_report(), tmp_path / "run.json"))
    paths = write_outputs(report, report_path=tmp_path / "run.json", reports_dir=tmp_path / "reports",
                          html=tmp_path / "run.html", markdown=tmp_path / "run.md")
    return report, paths


def _expected(report) -> list[list[str]]:
    metrics = headline_metrics(report)
    return [[name, str(piece.records), *(format_value(m, piece.summary.get(m)) for m in metrics)]
            for name, piece in report.turns.items()]


def test_in_a_browser_the_html_report_shows_a_row_per_turn_slice(browser, written) -> None:
    report, paths = written
    page = browser.new_page()
    try:
        page.goto(paths["html"].as_uri())
        assert page.evaluate(HEADS) == ["turn", "records", *headline_metrics(report)]
        shown = page.evaluate(ROWS)
        assert shown == _expected(report)
        assert [row[0] for row in shown] == ["first", "follow-up", "turn 1", "turn 2", "turn 3"]
        assert page.evaluate("document.querySelector('#turns').closest('section').querySelector('h2')"
                             ".textContent") == "By turn"
        assert page.errors() == []
    finally:
        page.close()


def test_the_markdown_summary_has_a_by_turn_table(written) -> None:
    report, paths = written
    lines = paths["markdown"].read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("**By turn**"))
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append(line)
    metrics = headline_metrics(report)
    assert table[0] == "| turn | records | " + " | ".join(f"`{m}`" for m in metrics) + " |"
    shown = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[:2] for row in shown] == [[row[0], row[1]] for row in _expected(report)]
    follow_up = report.turns["follow-up"].summary["recall@8"]
    assert shown[1][2] == format_value("recall@8", follow_up) and follow_up is not None


def test_a_run_of_single_questions_shows_no_turn_table(browser, tmp_path) -> None:
    report = rescore(load_report(SMALL))
    paths = write_outputs(report, reports_dir=tmp_path / "reports", html=tmp_path / "r.html",
                          markdown=tmp_path / "r.md")
    assert "By turn" not in paths["markdown"].read_text()
    page = browser.new_page()
    try:
        page.goto(paths["html"].as_uri())
        assert page.evaluate("document.querySelector('#turns') === null") is True
    finally:
        page.close()
