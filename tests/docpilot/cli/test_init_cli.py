"""`docpilot init`: a config and a starter golden set that run as written, and no file overwritten unasked."""

from __future__ import annotations

import shutil

import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.config.loading import load_config
from docpilot.corpus.pages import load_corpus
from tests.conftest import DATA


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(DATA / "pipeline" / "docs", tmp_path / "mydocs")
    return tmp_path


def test_init_writes_files_that_check_and_run(project):
    result = run("init", "--docs", "mydocs")
    assert result.exit_code == 0, result.output
    assert "config: configs/docpilot.yaml" in result.stdout and "golden set: evals/golden.yaml" in result.stdout
    config = yaml.safe_load((project / "configs" / "docpilot.yaml").read_text(encoding="utf-8"))
    assert config["corpus"]["docs"] == "mydocs" and config["golden"] == "evals/golden.yaml"
    records = yaml.safe_load((project / "evals" / "golden.yaml").read_text(encoding="utf-8"))
    corpus = load_corpus(project / "mydocs")
    positives = [r for r in records if r["gold"]]
    assert len(positives) == 3 and all(corpus.has_entry(r["gold"][0]) for r in positives)
    assert {r["split"] for r in records if not r["gold"]} == {"dev", "test"}
    # the config is picked up from configs/docpilot.yaml with no flag
    check = run("golden", "check")
    assert check.exit_code == 0, check.output
    evaluated = run("eval", "--gate-only", "--orchestrator", "inline", "--json")
    assert evaluated.exit_code == 0, evaluated.output


def test_the_configs_commented_retrieval_block_loads_as_hybrid_with_minilm(project):
    assert run("init", "--docs", "mydocs").exit_code == 0
    path = project / "configs" / "docpilot.yaml"
    text = path.read_text(encoding="utf-8")
    written = load_config(path).retrieval  # as written: the default
    assert (written.retriever, written.embedder) == ("hybrid", "static")
    commented = {"# retrieval:": "retrieval:", "#   retriever: hybrid": "   retriever: hybrid",
                 "#   embedder: minilm": "   embedder: minilm"}
    lines = text.splitlines()
    uncommented = [next((new for old, new in commented.items() if line.startswith(old)), line) for line in lines]
    assert sum(line != old for line, old in zip(uncommented, lines, strict=True)) == 3
    path.write_text("\n".join(uncommented) + "\n", encoding="utf-8")
    settings = load_config(path).retrieval
    assert (settings.retriever, settings.embedder) == ("hybrid", "minilm")


def test_init_never_overwrites_without_force(project):
    (project / "configs").mkdir()
    (project / "configs" / "docpilot.yaml").write_text("mine: true\n", encoding="utf-8")
    result = run("init", "--docs", "mydocs")
    assert result.exit_code == 2 and "already exist" in result.stderr and "--force" in result.stderr
    assert (project / "configs" / "docpilot.yaml").read_text(encoding="utf-8") == "mine: true\n"
    assert not (project / "evals").exists()
    assert run("init", "--docs", "mydocs", "--force").exit_code == 0
    assert "corpus:" in (project / "configs" / "docpilot.yaml").read_text(encoding="utf-8")


def test_init_on_a_missing_docs_folder_exits_2_and_writes_nothing(project):
    result = run("init", "--docs", "nowhere")
    assert result.exit_code == 2 and "nowhere" in result.stderr and "Traceback" not in result.output
    assert not (project / "configs").exists() and not (project / "evals").exists()


# Regression: the one starter gate (recall@8 >= 0.5) let a run PASS with most of its records failing.
def test_the_starter_gates_are_ones_a_team_keeps_and_the_config_says_so(project):
    assert run("init", "--docs", "mydocs").exit_code == 0
    text = (project / "configs" / "docpilot.yaml").read_text(encoding="utf-8")
    assert load_config(project / "configs" / "docpilot.yaml").gates == {"recall@8": ">= 0.8",
                                                                       "negatives_caught": ">= 0.5"}
    assert "Keep both as the set grows" in text and 'over_refusal_answer: "<= 0.2"' in text
    assert "https://example.com/docs/" in text and "a placeholder: set it to where the docs are published" in text
    evaluated = run("eval", "--orchestrator", "inline")
    assert "the placeholder `docpilot init` wrote: set corpus.base_url" in evaluated.output
