"""The stages as plain functions: gate refusals, model refusals and rows built from traces."""

from __future__ import annotations

from docpilot.config.model import Config
from docpilot.run.pipeline import (
    build_rows,
    model_shard,
    open_workspace,
    prime_shard,
    render_shard,
    retrieve_shard,
    start_traces,
)
from docpilot.schema import GoldenRecord
from tests.conftest import DATA

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


def test_the_gate_refuses_before_the_model(tmp_path):
    ws = workspace(tmp_path, guard={"mode": "on", "threshold": 1000.0})
    rows = run_all(ws)
    assert all(r.refused and r.refused_by == "gate" and r.answer is None for r in rows)
    assert all(r.first_token_ms is None for r in rows)


def test_gate_only_rows_have_no_answer_fields(tmp_path):
    ws = workspace(tmp_path)
    rows = build_rows(retrieve_shard(ws, start_traces(RECORDS)), gate_only=True)
    assert rows[0].retrieved and rows[0].primed == [] and rows[0].answer is None and rows[0].latency_ms is None
