"""`docpilot golden draft --model local`: questions reworded by SmolLM2 through llama.cpp, offline, on three sections."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from docpilot.cli import main
from docpilot.golden.loading import load_golden
from tests.conftest import ROOT
from tests.support.llama_server import needs_local

pytestmark = needs_local


def test_a_local_model_rewords_drafts_or_the_template_stays_and_says_why(tmp_path, monkeypatch, llama_server):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    # The config names the test process's llama.cpp server, so the command uses it instead of starting one.
    (tmp_path / "local.yaml").write_text(f"model:\n  provider: local\n  base_url: {llama_server}\n")
    result = CliRunner().invoke(main, ["golden", "draft", "--docs", "docs", "--count", "1", "--negatives", "0",
                                       "--model", "local", "--config", "local.yaml", "--out", "drafts.yaml"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "drafts.yaml").read_text(encoding="utf-8")
    assert "at temperature 0" in text and "You reword questions about software documentation" in text
    records = load_golden(tmp_path / "drafts.yaml")
    assert len(records) == 1
    for record in records:
        assert record.origin.startswith("model:local/") or "fell back:" in record.origin, record.origin
        if record.origin.startswith("model:local/"):
            assert record.question.endswith("?")
    check = CliRunner().invoke(main, ["golden", "check", "--docs", "docs", "--golden", "drafts.yaml"])
    assert check.exit_code == 0, check.output


def test_a_rewrite_that_loses_a_code_span_or_is_refused_keeps_the_template():
    from docpilot.drafting.rewrite import _rewritten
    from docpilot.golden.draft import Draft
    from docpilot.models.base import Turn

    draft = Draft(id="d", question="What is the default of `model.timeout_s`?", gold=("models#limits",),
                  gold_answer="`model.timeout_s` | `60` | Budget of one turn.", identifiers=("model.timeout_s", "60"),
                  split="dev", origin="template:table-default")
    label = "model:local/SmolLM2-135M-Instruct"
    kept = _rewritten(draft, Turn(answer="How long may one turn take before `model.timeout_s` stops it?"), label)
    assert kept.origin == label and kept.template_question == draft.question
    lost = _rewritten(draft, Turn(answer="How long may one turn take?"), label)
    assert lost.question == draft.question and "lost a code span" in lost.origin
    refused = _rewritten(draft, Turn(answer="REFUSE: unsafe", refused=True, refusal_cause="unsafe"), label)
    assert refused.question == draft.question and "the model refused" in refused.origin
