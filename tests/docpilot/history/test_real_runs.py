"""History over real runs of the demo (the extractive model over a copy of docs/): the nights the docs, the
config and the model changed are the nights it marks, with those changes named; and two evals finishing at
once both land in the run index.

The nights run in this process (the command's own entry point, through CliRunner); the two evals
finishing at once are two processes, as two nightly jobs would be."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.history.index import INDEX_FILE, RunIndex
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _config(tmp_path, name: str = "docpilot.yaml", **changes) -> str:
    settings = {
        "corpus": {"docs": str(tmp_path / "docs")},
        "golden": str(ROOT / "evals" / "golden.yaml"),
        "reports_dir": str(tmp_path / "reports"),
        "cache_dir": str(tmp_path / "cache"),
        **changes,
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def _docpilot(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _strip_text(page):
    """Keep a page's headings (the golden set names its sections) and drop every line of text under them."""
    lines = page.read_text(encoding="utf-8").splitlines()
    kept = [line if line.startswith("#") else "" for line in lines]
    page.write_text("\n".join(kept) + "\n", encoding="utf-8")


@pytest.fixture()
def demo(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path


def test_history_marks_the_nights_the_docs_the_config_and_the_model_changed(demo, monkeypatch):
    monkeypatch.chdir(demo)
    nights = [
        _config(demo, "n1.yaml"),                                                     # 1: the baseline
        _config(demo, "n2.yaml"),                                                     # 2: the same system again
        "docs",                                                                       # 3: two pages lose their text
        _config(demo, "n4.yaml", prime={"top_k": 1}),                                 # 4: one source, not five
        _config(demo, "n5.yaml", prime={"top_k": 1}, model={"max_sentences": 1}),     # 5: shorter answers
    ]
    for night in nights:
        if night == "docs":
            for page in ("gates", "configuration"):
                _strip_text(demo / "docs" / f"{page}.md")
            night = _config(demo, "n3.yaml")
        result = _docpilot("eval", "--config", night)
        assert result.exit_code in (0, 1), result.stderr
    metrics = ("recall@8", "answer_f1", "citation_precision", "identifier_recall")
    result = _docpilot("history", *metrics, "--json", "--reports", str(demo / "reports"))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    runs = [r["run_id"] for r in data["runs"]]
    assert len(runs) == 5
    moves = {runs.index(m["run_id"]) + 1: m for m in data["moves"]}
    assert set(moves) == {3, 4, 5}, data["moves"]
    assert "worse" in {move["change"] for move in moves[3]["metrics"].values()}
    assert moves[3]["cause"]["changed"] == ["corpus"]
    assert moves[3]["cause"]["pages"]["changed"] == ["configuration", "gates"]
    assert moves[4]["metrics"]["citation_precision"]["change"] == "better"  # one source: fewer wrong citations
    assert moves[4]["cause"]["changed"] == ["config"]
    assert moves[4]["cause"]["settings"] == [{"key": "prime.top_k", "a": 5, "b": 1}]
    assert moves[5]["metrics"]["identifier_recall"]["change"] == "worse"  # one sentence: fewer exact strings
    assert "model" in moves[5]["cause"]["changed"]
    assert {"key": "model.max_sentences", "a": 3, "b": 1} in moves[5]["cause"]["settings"]
    text = _docpilot("history", *metrics, "--reports", str(demo / "reports"))
    assert "docs: pages changed: configuration, gates" in text.stdout
    assert "setting prime.top_k 5 → 1" in text.stdout and "setting model.max_sentences 3 → 1" in text.stdout


def test_two_evals_finishing_at_once_both_land_in_the_index(demo):
    runs = [subprocess.Popen([sys.executable, "-m", "docpilot", "eval", "--config",
                              _config(demo, name=f"c{i}.yaml", cache_dir=str(demo / f"cache{i}"))],
                             cwd=demo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}) for i in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode in (0, 1), err
        assert "locked" not in err and "Traceback" not in err
    reports = demo / "reports"
    assert (reports / INDEX_FILE).is_file()
    index = RunIndex(reports)
    # Both evals indexed their own report: nothing is left for a reader to add.
    assert len(index.runs()) == 2
    assert index.refresh() == [] and len(index.runs()) == 2
