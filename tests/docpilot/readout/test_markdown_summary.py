"""The Markdown summary: verdict line, metric table with n, failed gates, capped failing records."""

from __future__ import annotations

import re

import pytest

from docpilot.readout.files import write_readout
from docpilot.readout.markdown import render_markdown
from docpilot.readout.outcomes import prepare_readout
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.schema import GateResult
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"


@pytest.fixture
def report():
    return load_report(SMALL)


@pytest.fixture
def summary(report, tmp_path):
    return render_markdown(prepare_readout(report, reports_dir=tmp_path))


def table_rows(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def cells(line: str) -> int:
    """Cells of a table row, counting only pipes that are not escaped."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_the_verdict_line_comes_first_and_names_the_failed_gates(summary):
    assert summary.splitlines()[0] == ("### ❌ DocPilot: FAIL on `hallucinated_citations == 0`, `recall@8 >= 0.9` "
                                       "— golden set, all split, 8 records")
    assert "Run `20261130T120000Z-abc123` at 2026-11-30T12:00:00+00:00" in summary


def test_the_metric_table_shows_values_with_their_n_and_bounds(summary, report):
    rows = table_rows(summary, "| metric | value | n |")
    recall = next(r for r in rows if r.startswith("| `recall@8` |"))
    assert recall == f"| `recall@8` | {report.summary['recall@8']:.3f} | {report.counts['recall@8']} |"
    refusal = next(r for r in rows if r.startswith("| `over_refusal_answer` |"))
    assert f"(≤ {report.summary['over_refusal_answer_upper95']:.3f})" in refusal
    assert not any("upper95" in r or "stage_" in r for r in rows)
    assert "`attack_success_rate`" not in summary  # a golden run cannot produce it: left off, with a line
    assert ("Left off, as a golden run has no attack probes to measure them on: attack\\_success\\_rate, "
            "refusal\\_accuracy, safe\\_answer\\_rate.") in summary


def test_failed_gates_list_their_records(summary):
    assert "- `hallucinated_citations == 0`: value 1 — records: `pos-invented`" in summary
    assert "- `recall@8 >= 0.9`: value 0." in summary
    assert "scope_violations ==" not in summary  # passed gates are left out


def test_failing_records_are_capped_with_a_count_of_the_rest(report, tmp_path):
    text = render_markdown(prepare_readout(report, reports_dir=tmp_path), max_records=2)
    rows = table_rows(text, "| record | kind | split | cause |")
    assert len(rows) == 2
    assert rows[0].startswith("| `pos-miss` | positive | dev | not-retrieved — no gold entry")
    assert "… and 4 more failing records" in text


def test_golden_and_model_text_cannot_break_the_table_or_inject_html(report, tmp_path):
    rows = [r.model_copy(update={"gold": ["a|b<script>x</script>"]}) if r.id == "pos-miss" else r
            for r in report.rows]
    text = render_markdown(prepare_readout(rescore(report.model_copy(update={"rows": rows})), reports_dir=tmp_path))
    record_rows = table_rows(text, "| record | kind | split | cause |")
    assert all(cells(r) == 4 for r in record_rows)
    miss = next(r for r in record_rows if "pos-miss" in r)
    assert r"a\|b\<script\>x\</script\>" in miss
    assert "\x07" not in text  # control characters from an error message are dropped
    injected = next(r for r in record_rows if "pwned" in r)
    # the id sits in a code span, where Markdown shows markup as text; pipes and backticks are replaced
    assert injected.startswith('| `x"><script>window.__pwned=3</script>` |')


def test_moves_appear_when_there_is_a_previous_comparable_run(report, tmp_path):
    older = report.model_copy(update={"run_id": "20261129T080000Z-aaaaaa", "created_at": "2026-11-29T08:00:00+00:00",
                                      "summary": {**report.summary, "recall@8": 0.25}})
    write_report(older, tmp_path / f"{older.run_id}.json")
    text = render_markdown(prepare_readout(report, reports_dir=tmp_path))
    assert "Moves since run 20261129T080000Z-aaaaaa" in text
    recall = next(r for r in table_rows(text, "| metric | value | n | move |") if r.startswith("| `recall@8` |"))
    assert recall.endswith(f"| +{report.summary['recall@8'] - 0.25:.3f} ↑ better |")


def test_a_passing_run_with_failing_records_does_not_read_as_failing(report, tmp_path):
    # Regression: the headline said "PASS — … 18 failing", which reads as a contradiction.
    rows = [r for r in report.rows if r.id in ("pos-hit", "pos-miss", "neg-refused")]
    passing = rescore(report.model_copy(update={"rows": rows, "config": {**report.config, "gates": {}}}))
    text = render_markdown(prepare_readout(passing, reports_dir=tmp_path))
    assert text.splitlines()[0] == "### ✅ DocPilot: PASS, 4 of 4 gates held — golden set, all split, 3 records"
    assert "**Records with a failing outcome** (1): each counts in its metrics; only the gates above" in text


def test_a_run_with_no_failures_says_so(report, tmp_path):
    clean = rescore(report.model_copy(update={"rows": [r for r in report.rows if r.id in ("pos-hit", "neg-refused")],
                                              "config": {**report.config, "gates": {}}}))
    text = render_markdown(prepare_readout(clean, reports_dir=tmp_path))
    assert text.startswith("### ✅ DocPilot: PASS")
    assert text.rstrip().endswith("No record failed.") and "**Failed gates**" not in text


def test_write_markdown_is_atomic(report, tmp_path):
    target = tmp_path / "out" / "summary.md"
    write_readout(prepare_readout(report, reports_dir=tmp_path / "reports"), markdown=target)
    assert target.read_text(encoding="utf-8").startswith("### ❌ DocPilot: FAIL")
    assert [p.name for p in target.parent.iterdir()] == ["summary.md"]


# Regression: a failing 0.7996 against '>= 0.8' printed as 0.800.
def test_a_failed_gate_shows_the_value_below_its_threshold(report, tmp_path):
    gate = GateResult(metric="recall@8", op=">=", threshold=0.8, value=0.7996, passed=False)
    text = render_markdown(prepare_readout(report.model_copy(update={"gates": [gate]}), reports_dir=tmp_path))
    assert "- `recall@8 >= 0.8`: value 0.7996" in text
