"""`docpilot improve compare` on the reports of real runs: it names what changed, and only that."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def _eval(docs: Path, out: Path, config: str = "", *extra: str) -> dict:
    config_file = out.with_suffix(".yaml")
    config_file.write_text(config, encoding="utf-8")
    _run("eval", "--config", str(config_file), "--docs", str(docs), "--golden", str(PIPELINE / "golden.yaml"),
         "--orchestrator", "inline", "--out", str(out), *extra)
    return json.loads(out.read_text(encoding="utf-8"))


def _compare(a: Path, b: Path) -> tuple[str, dict]:
    return _run("improve", "compare", str(a), str(b)), json.loads(_run("improve", "compare", str(a), str(b), "--json"))


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(PIPELINE / "docs", docs)
    return docs


# Regression: the config fingerprint was hashed after redaction, which turned every page
# name in reference_pages (and every URL query value) into `[redacted]`, so two runs that
# differed there had the same fingerprint and the comparison saw no change.
@pytest.mark.parametrize(("before", "after", "setting"), [
    ("retrieval:\n  reference_pages: [api-reference]\n", "retrieval:\n  reference_pages: [key-concepts]\n",
     'setting retrieval.reference_pages ["api-reference"] → ["key-concepts"]'),
    ("model:\n  base_url: http://127.0.0.1:9/v1?api-version=1\n",
     "model:\n  base_url: http://127.0.0.1:9/v1?api-version=2\n", None),
])
def test_configs_that_differ_only_where_redaction_looked_have_different_fingerprints(tmp_path, before, after,
                                                                                     setting):
    docs = _docs(tmp_path)
    a = _eval(docs, tmp_path / "a.json", before, "--gate-only")
    b = _eval(docs, tmp_path / "b.json", after, "--gate-only")
    assert a["fingerprints"]["config"] != b["fingerprints"]["config"]
    text, comparison = _compare(tmp_path / "a.json", tmp_path / "b.json")
    assert comparison["changed"] == ["config"]
    if setting is None:  # the stored copies both read api-version=[redacted]
        assert comparison["settings"] == []
        assert any("no stored setting does: a value the reports hide" in w for w in comparison["warnings"])
    else:
        assert setting in text


# Regression: with only vocabulary.json changed, `improve compare` said "model" changed
# (the extractive model's fingerprint held the corpus's) and could not name the file.
def test_a_changed_vocabulary_is_named_and_the_model_is_not(tmp_path):
    docs = _docs(tmp_path)
    (docs / "vocabulary.json").write_text('{"login": ["authentication"]}', encoding="utf-8")
    a = _eval(docs, tmp_path / "a.json", "", "--gate-only")
    (docs / "vocabulary.json").write_text('{"login": ["authentication", "sign in"]}', encoding="utf-8")
    b = _eval(docs, tmp_path / "b.json", "", "--gate-only")
    assert a["fingerprints"]["model"] == b["fingerprints"]["model"]
    text, comparison = _compare(tmp_path / "a.json", tmp_path / "b.json")
    assert comparison["changed"] == ["corpus"]
    assert comparison["pages"]["side_files"] == {"vocabulary.json": "changed"}
    assert "changed between the runs: corpus\n" in text and "docs: vocabulary.json changed\n" in text


# Regression: an added llms.txt showed only as "model" and the pages whose descriptions it set.
def test_an_added_llms_txt_is_named_with_the_pages_it_describes(tmp_path):
    docs = _docs(tmp_path)
    _eval(docs, tmp_path / "a.json", "", "--gate-only")
    llms = "# Acme\n\n## Docs\n\n- [Deploy](guide/deploy.md): releases and how to roll them back\n"
    (docs / "llms.txt").write_text(llms, encoding="utf-8")
    _eval(docs, tmp_path / "b.json", "", "--gate-only")
    text, comparison = _compare(tmp_path / "a.json", tmp_path / "b.json")
    assert comparison["changed"] == ["corpus"]
    assert comparison["pages"]["side_files"] == {"llms.txt": "added"}
    assert "docs: llms.txt added; pages changed: guide/deploy" in text, text


# Regression: the local provider's server listens on a port picked for each run, and
# `improve compare` listed `model.base_url` (and "config") as a change between two runs of it.
def test_two_runs_of_the_local_provider_on_different_ports_show_no_setting_change(tmp_path):
    docs = _docs(tmp_path)
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"GGUF" + bytes(64))  # named by its size and first bytes, never loaded here
    config = f"model:\n  provider: local\n  path: {model_file}\n"
    script = OpenAIScript(default=Reply(answer="Install Acme with pip install acme-cli [1]."))
    with serve_openai(script) as first, serve_openai(script) as second:
        a = _eval(docs, tmp_path / "a.json", config, "--base-url", first)
        b = _eval(docs, tmp_path / "b.json", config, "--base-url", second)
    assert a["config"]["model"]["base_url"] != b["config"]["model"]["base_url"]  # the port of the day is kept
    text, comparison = _compare(tmp_path / "a.json", tmp_path / "b.json")
    assert comparison["settings"] == [] and comparison["changed"] == []
    assert "setting model.base_url" not in text
