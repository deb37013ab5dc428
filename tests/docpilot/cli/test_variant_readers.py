"""`status`, `improve` and `improve compare` read one variant of a stored run of several (`--variant NAME`).

The run is made once, by `docpilot eval` in a process of its own (each variant runs in a
process); the readers run in this one, through the command's entry point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _docpilot(*args: str, reports) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "docpilot", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "DOCPILOT_REPORTS_DIR": str(reports),
                                            "DOCPILOT_CACHE_DIR": str(reports / "cache")})


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A run of two extractive variants of the demo's dev records, stored in a reports folder."""
    reports = tmp_path_factory.mktemp("reports")
    result = _docpilot("eval", "--split", "dev", "--limit", "12", "--orchestrator", "inline",
                       "--variant", "k5", "--variant", "k1=prime.top_k=1", "--out", str(reports / "run.json"),
                       reports=reports)
    assert result.returncode in (0, 1), result.stderr
    return reports, json.loads((reports / "run.json").read_text())


@pytest.fixture
def read(monkeypatch):
    """Run a reading command in this process, from the checkout's root as the eval ran."""
    monkeypatch.chdir(ROOT)

    def run(*args: str, reports):
        return CliRunner().invoke(main, list(args), env={"DOCPILOT_REPORTS_DIR": str(reports)})

    return run


def test_status_shows_the_variant_asked_for_and_the_baseline_by_default(stored, read):
    reports, report = stored
    k1 = {v["name"]: v for v in report["variants"]}["k1"]
    shown = json.loads(read("status", "--reports", str(reports), "--variant", "k1", "--json",
                                 reports=reports).stdout)
    assert shown["metrics"]["answer_f1"]["value"] == k1["summary"]["answer_f1"]
    default = json.loads(read("status", "--reports", str(reports), "--json", reports=reports).stdout)
    assert default["metrics"]["answer_f1"]["value"] == report["variants"][0]["summary"]["answer_f1"]
    wrong = read("status", "--reports", str(reports), "--variant", "k9", reports=reports)
    assert wrong.exit_code == 2 and "has no variant 'k9'" in wrong.stderr and "its variants: k5, k1" in wrong.stderr


def test_improve_diagnoses_one_variants_records(stored, read):
    reports, report = stored
    # --no-settings: the embedders improve would try (a MiniLM build of the demo docs) rank the same
    # questions whichever variant is read; the diagnosis is what reads one variant's rows.
    def improve(*variant: str):
        return read("improve", str(reports / "run.json"), *variant, "--no-settings", "--json", reports=reports)

    result = improve("--variant", "k1")
    assert result.exit_code == 0, result.stderr
    diagnosis = json.loads(result.stdout)
    assert diagnosis["records"] == 12  # k1's rows only, not both variants'
    baseline = json.loads(improve().stdout)
    k5 = json.loads(improve("--variant", "k5").stdout)
    assert baseline["failures"] == k5["failures"] and baseline["records"] == 12  # the baseline by default
    # One source primed instead of five changes which answers fail: k1's own failures are diagnosed.
    assert diagnosis["failures"] != k5["failures"]


def test_improve_compare_pairs_the_same_variant_of_two_runs(stored, read):
    reports, _ = stored
    result = read("improve", "compare", str(reports / "run.json"), str(reports / "run.json"),
                       "--variant", "k1", "--json", reports=reports)
    assert result.exit_code == 0, result.stderr
    comparison = json.loads(result.stdout)
    assert comparison["records"] == 12  # one variant's records, not both variants' rows
