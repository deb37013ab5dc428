"""An eval adds its own report to the run index of the reports folder, and a report written elsewhere to none."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.history.index import INDEX_FILE, RunIndex
from tests.support.pipeline_jobs import PIPELINE


def _eval(tmp_path, *args: str):
    config = tmp_path / "docpilot.yaml"
    settings = {"corpus": {"docs": str(PIPELINE / "docs")}, "golden": str(PIPELINE / "golden.yaml"),
                "reports_dir": str(tmp_path / "reports"), "cache_dir": str(tmp_path / "cache")}
    config.write_text(yaml.safe_dump(settings))
    return CliRunner().invoke(main, ["eval", "--config", str(config), "--gate-only", *args])


def test_an_eval_indexes_its_report_as_it_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _eval(tmp_path)
    assert result.exit_code in (0, 1), result.output
    (run,) = RunIndex(tmp_path / "reports").runs()  # read without a refresh: the eval put it there
    assert (tmp_path / "reports" / run.file).is_file() and run.gate_only and run.model == "none (gate-only)"


def test_a_report_written_with_out_touches_no_folder_index(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _eval(tmp_path, "--out", str(elsewhere / "run.json"))
    assert result.exit_code in (0, 1), result.output
    assert (elsewhere / "run.json").is_file()
    assert not (elsewhere / INDEX_FILE).exists() and not (tmp_path / "reports" / INDEX_FILE).exists()
