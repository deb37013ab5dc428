"""The stages as plain functions: gate refusals, model refusals and rows built from traces."""

from __future__ import annotations

from docpilot.assistant.workspace import open_workspace
from docpilot.config.model import Config
from docpilot.run.road import (
    build_rows,
    prime_shard,
    render_shard,
    start_traces,
)
from docpilot.schema import GoldenRecord
from tests.conftest import DATA
from tests.support.model_stage import model_shard, retrieve_shard

RECORDS = [
    GoldenRecord(id="rollback", question="How can I roll back to the previous release?", gold=["guide/deploy"],
                 gold_answer="Run acme rollback.", split="dev"),
    GoldenRecord(id="neg", question="How much does the enterprise plan cost?", split="dev"),
]


def workspace(tmp_path, **changes):
    config = Config(corpus={"docs": str(DATA / "pipeline" / "docs")}, cache_dir=str(tmp_path / "cache"), **changes)
    return open_workspace(config)


def run_all(ws):
    traces = start_traces(RECORDS)
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(ws, traces)
    return build_rows(traces)


def test_rows_carry_every_stage(tmp_path):
    positive, negative = run_all(workspace(tmp_path))
    assert positive.retrieved[0] == "guide/deploy#rollback" and positive.primed[0] == "guide/deploy#rollback"
    assert positive.answer.endswith("[1]") and positive.citations == ["guide/deploy#rollback"]
    assert positive.links == 1 and positive.sources_shown == ["guide/deploy#rollback"]
    assert positive.answer_language == "en" and positive.language == "en"
    assert positive.latency_ms >= positive.first_token_ms > 0
    assert set(positive.stages_ms) == {"retrieve", "model"}
    assert negative.refused and negative.refused_by == "model" and negative.refusal_cause == "not-answerable"
    assert negative.sources_shown == [] and negative.answer_language is None


# Regression: a model refusal's row carried the time its refusal text streamed as first_token_ms.
def test_a_refused_row_has_no_first_token_time(tmp_path):
    positive, negative = run_all(workspace(tmp_path))
    assert negative.refused and negative.refused_by == "model" and negative.latency_ms > 0
    assert negative.first_token_ms is None
    assert positive.answered and positive.first_token_ms is not None


def test_the_gate_refuses_before_the_model(tmp_path):
    ws = workspace(tmp_path, guard={"mode": "on", "threshold": 1000.0})
    rows = run_all(ws)
    assert all(r.refused and r.refused_by == "gate" and r.answer is None for r in rows)
    assert all(r.first_token_ms is None for r in rows)


def test_gate_only_rows_have_no_answer_fields(tmp_path):
    ws = workspace(tmp_path)
    rows = build_rows(retrieve_shard(ws, start_traces(RECORDS)), gate_only=True)
    assert rows[0].retrieved and rows[0].primed == [] and rows[0].answer is None and rows[0].latency_ms is None


def test_a_short_question_expects_the_corpus_language(tmp_path):
    # Regression: "Can I enter temperatures in Fahrenheit?" was expected in German, its answer
    # then failed language_match and the record was called wrong-language.
    ws = workspace(tmp_path)
    record = GoldenRecord(id="fahrenheit", question="Can I enter temperatures in Fahrenheit?", gold=["guide/deploy"],
                          split="dev")
    traces = start_traces([record])
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(ws, traces)
    (row,) = build_rows(traces, corpus_language="en")
    assert row.question_language is None and row.language == "en"


def test_a_short_answer_is_taken_to_be_in_the_expected_language(tmp_path):
    ws = workspace(tmp_path)
    traces = start_traces([RECORDS[0]])
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(ws, traces)
    traces[0].turn = traces[0].turn.model_copy(update={"answer": "Run acme rollback [1]."})
    traces[0].languages = {}
    (row,) = build_rows(traces, corpus_language="en")
    assert row.answer_language == "en" == row.language  # four words: too few to tell, so no false mismatch


def test_detections_stored_under_another_rule_are_made_again(tmp_path):
    ws = workspace(tmp_path)
    traces = start_traces([RECORDS[0]])
    for stage in (retrieve_shard, prime_shard, model_shard, render_shard):
        traces = stage(ws, traces)
    traces[0].languages = {"question": "de", "answer": "de"}  # as stored before the rule existed
    (row,) = build_rows(traces, corpus_language="en")
    assert (row.question_language, row.language, row.answer_language) == ("en", "en", "en")


def _copy_docs(tmp_path):
    import shutil

    docs = tmp_path / "docs"
    shutil.copytree(DATA / "pipeline" / "docs", docs)
    return docs


# Regression: the workspace was kept per config alone, so a page added between two runs
# in one process left the second run with the old corpus and its fingerprint.
def test_a_page_added_between_runs_is_seen_by_the_next_run(tmp_path):
    docs = _copy_docs(tmp_path)
    config = Config(corpus={"docs": str(docs)}, cache_dir=str(tmp_path / "cache"))
    before = open_workspace(config)
    assert open_workspace(config) is before  # unchanged docs: the same workspace
    (docs / "guide" / "billing.md").write_text("# Billing\n\nInvoices are sent on the first of the month.\n")
    after = open_workspace(config)
    assert "guide/billing" in after.corpus.pages and "guide/billing" not in before.corpus.pages
    assert after.corpus.fingerprint != before.corpus.fingerprint


def test_a_worker_holding_other_docs_reloads_them_for_the_runs_fingerprint(tmp_path):
    docs = _copy_docs(tmp_path)
    config = Config(corpus={"docs": str(docs)}, cache_dir=str(tmp_path / "cache"))
    started = open_workspace(config).corpus.fingerprint
    import dataclasses

    stale = open_workspace(config)  # the one the process keeps
    stale.corpus = dataclasses.replace(stale.corpus, fingerprint="0" * 64)  # as if loaded from older docs
    fresh = open_workspace(config, fingerprint=started)
    assert fresh is not stale and fresh.corpus.fingerprint == started


def test_docs_changed_under_a_running_eval_are_an_error_not_a_poisoned_cache(tmp_path):
    import pytest

    from docpilot.errors import CorpusError

    docs = _copy_docs(tmp_path)
    config = Config(corpus={"docs": str(docs)}, cache_dir=str(tmp_path / "cache"))
    started = open_workspace(config).corpus.fingerprint
    (docs / "guide" / "billing.md").write_text("# Billing\n\nInvoices are sent on the first of the month.\n")
    assert open_workspace(config, fingerprint=started).corpus.fingerprint == started  # kept: ranks what the run began with
    # A worker that starts after the edit holds nothing yet: as one that keeps no workspace for these settings.
    with pytest.raises(CorpusError, match="the docs changed during the run"):
        open_workspace(config, use_cache=False, fingerprint=started)
