"""The eval flow under Prefect and inline: the same stages give the same rows and summary."""

from __future__ import annotations

import json

import pytest

from docpilot.config.model import Config
from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob
from docpilot.run.orchestrator import choose
from docpilot.run.road import travel
from tests.conftest import DATA
from tests.support.evals import run_eval
from tests.support.pipeline_jobs import pipeline_job

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"
TIMING_ROW_FIELDS = {"latency_ms", "first_token_ms", "first_thought_ms", "stages_ms"}
TIMING_METRICS = ("latency_", "first_token_", "stage_")


def job(tmp_path, name: str, **changes) -> EvalJob:
    config = Config(
        corpus={"docs": str(PIPELINE / "docs")},
        golden=str(PIPELINE / "golden.yaml"),
        cache_dir=str(tmp_path / name / "cache"),
        reports_dir=str(tmp_path / name / "reports"),
        shard_size=4,  # two shards for six records
    )
    return EvalJob(config=config, golden=config.golden, **changes)


def comparable(report):
    rows = [r.model_dump(exclude=TIMING_ROW_FIELDS) for r in report.rows]
    summary = {k: v for k, v in report.summary.items() if not k.startswith(TIMING_METRICS)}
    return rows, summary


@pytest.fixture(scope="module")
def prefect_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("prefect")
    return run_eval(job(tmp_path, "prefect"), "prefect")


def test_prefect_and_inline_agree(prefect_run, tmp_path):
    prefect_report, prefect_path = prefect_run, prefect_run.path
    inline_report = run_eval(job(tmp_path, "inline"), "inline")
    assert prefect_report.orchestrator == "prefect" and inline_report.orchestrator == "inline"
    assert comparable(prefect_report) == comparable(inline_report)
    assert prefect_report.gates == inline_report.gates and prefect_report.verdict == inline_report.verdict
    assert prefect_report.orchestrator_reason.startswith("--orchestrator prefect")
    assert "--orchestrator inline" in prefect_report.orchestrator_other
    assert "prefect server start" in inline_report.orchestrator_other
    assert json.loads(open(prefect_path).read())["run_id"] == prefect_report.run_id


def test_a_full_run_scores_every_record(prefect_run):
    report = prefect_run
    assert [r.id for r in report.rows] == ["install", "token-env", "rollback", "rotate", "neg-pricing", "neg-kubernetes"]
    assert report.summary["recall@8"] is not None and report.summary["answer_f1"] is not None
    assert all(r.latency_ms is not None for r in report.rows)
    negatives = [r for r in report.rows if r.kind == "negative"]
    assert all(r.refused and r.refused_by == "model" for r in negatives)


def test_a_rerun_reuses_every_cached_stage(tmp_path):
    first = run_eval(job(tmp_path, "again"), "inline")
    second = run_eval(job(tmp_path, "again"), "inline")
    assert all(r.cached == [] for r in first.rows)
    answered = [r for r in second.rows]
    assert all("retrieve" in r.cached and "model" in r.cached for r in answered)
    # Cached rows keep their original timings.
    assert [r.latency_ms for r in first.rows] == [r.latency_ms for r in second.rows]
    assert comparable(first) == (
        [dict(r, cached=[]) for r in comparable(second)[0]],
        comparable(second)[1],
    )


def test_an_executor_chooses_where_shards_travel_never_the_order_of_their_stages(tmp_path):
    # Any executor takes each shard down the one road: one that sends the shards one at a
    # time, in this thread, gives the inline run's rows, and a re-run finds every stage stored.
    travelled: list[int] = []

    class OneAtATime:
        orchestration = choose("prefect")

        def around(self, job, body):
            return body()

        def shards(self, run, shards):
            for records in shards:
                travelled.append(len(records))
                yield travel(run, records)

    inline = run_eval(job(tmp_path, "inline"), "inline")
    first = evaluate(job(tmp_path, "one"), OneAtATime())
    assert sum(travelled) == len(first.rows) == 6 and first.orchestrator == "prefect"
    assert comparable(first) == comparable(inline)
    again = evaluate(job(tmp_path, "one"), OneAtATime())
    assert all(set(r.cached) == {"retrieve", "model"} for r in again.rows)
    assert [r.answer for r in again.rows] == [r.answer for r in first.rows]


def test_gate_only_reports_retrieval_alone(tmp_path):
    report = run_eval(job(tmp_path, "gate", gate_only=True), "inline")
    assert report.gate_only
    assert all(r.answer is None and r.primed == [] for r in report.rows)
    assert "recall@8" in report.summary and "answer_f1" not in report.summary


def test_split_selects_records(tmp_path):
    report = run_eval(job(tmp_path, "dev", split="dev", gate_only=True), "inline")
    assert {r.split for r in report.rows} == {"dev"} and len(report.rows) == 3


def test_auto_runs_inline_without_an_api_and_under_prefect_with_one(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(tmp_path / "no-profiles.toml"))
    monkeypatch.chdir(tmp_path)
    report = run_eval(job(tmp_path, "auto", gate_only=True), "auto")
    assert (report.orchestrator, report.orchestrator_reason) == ("inline", "no Prefect API is configured")
    assert choose("auto", environ={"PREFECT_API_URL": "http://127.0.0.1:1/api"}).orchestrator == "prefect"
    assert choose("auto", runner="dask").orchestrator == "prefect"


def test_the_server_runtime_measures_the_same_assistant_over_http(tmp_path):
    """`eval --runtime=server` with no URL serves the config on loopback for the run."""
    local = run_eval(job(tmp_path, "local"), "inline")
    served = run_eval(job(tmp_path, "served", runtime="server"), "inline")
    assert served.runtime == "server" and served.cache_stats == {}
    # A server returns its hits only, so its rows search for the gold that deep (docs/report.md).
    compared = TIMING_ROW_FIELDS | {"cached", "gold_depth"}
    assert [r.model_dump(exclude=compared) for r in served.rows] == [r.model_dump(exclude=compared) for r in local.rows]
    for row in served.rows:
        assert set(row.stages_ms) == {"embed", "retrieve", "model"}
        assert sum(row.stages_ms.values()) <= row.latency_ms
    assert served.summary["stage_embed_p50"] is not None


def test_repeats_under_prefect_give_the_inline_run_s_samples(tmp_path):
    # model.repeat: 3 asks each turn three times under Prefect too: its shards take the one road.
    inline = run_eval(pipeline_job(tmp_path / "inline", model={"repeat": 3}), "inline")
    flow = run_eval(pipeline_job(tmp_path / "prefect", model={"repeat": 3}), "prefect")
    assert flow.orchestrator == "prefect"
    samples = [(r.id, r.sample, r.answer) for r in flow.rows]
    assert len(samples) == 18 and [s for _, s, _ in samples] == [0, 1, 2] * 6
    assert samples == [(r.id, r.sample, r.answer) for r in inline.rows]
    assert comparable(flow) == comparable(inline)
    assert flow.stability == inline.stability and flow.stability is not None
