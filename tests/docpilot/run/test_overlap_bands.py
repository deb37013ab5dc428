"""Recall by overlap band for any golden set: each positive's overlap measured in the run, as `golden check` measures it."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from docpilot.metrics.slices import BANDS, overlap_band
from docpilot.metrics.summary import summarize

from docpilot.cli import main
from docpilot.reports.report import load_report
from tests.conftest import ROOT


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "evals").mkdir()
    shutil.copy(ROOT / "evals" / "golden.yaml", tmp_path / "evals" / "golden.yaml")
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_a_hand_written_set_reports_recall_by_overlap_band(project):
    checked = run("golden", "check", "--docs", "docs", "--golden", "evals/golden.yaml", "--json")
    assert checked.exit_code == 0, checked.output
    measured = {r["id"]: r["overlap"] for r in json.loads(checked.stdout)["bias"]["records"]}

    evaluated = run("eval", "--docs", "docs", "--golden", "evals/golden.yaml", "--gate-only",
                    "--orchestrator", "inline", "--out", "report.json")
    assert evaluated.exit_code in (0, 1), evaluated.output
    assert "by overlap band" in evaluated.output
    report = load_report(project / "report.json")
    positives = [row for row in report.rows if row.kind == "positive"]
    # The run measures over its retriever's own BM25; `golden check` builds one: the same figures.
    assert {row.id: row.overlap for row in positives} == measured
    assert all(row.overlap is None for row in report.rows if row.kind != "positive")

    bands = report.bands
    assert list(bands) == [name for name, _ in BANDS if name in bands] and len(bands) >= 2
    assert sum(piece.records for piece in bands.values()) == sum(row.overlap is not None for row in positives)
    for name, piece in bands.items():
        members = [row for row in positives if overlap_band(row.overlap) == name]
        assert (piece.summary, piece.counts) == summarize(members, gate_only=True)
    # A report read back and rescored gives the same bands.
    from docpilot.reports.report import rescore

    assert rescore(report).bands == bands
