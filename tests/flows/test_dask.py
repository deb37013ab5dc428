"""Shards on a Dask cluster: the same rows and summary as an inline run, and the cache kept by the flow."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import uuid

import psutil
import pytest
from distributed import LocalCluster  # noqa: E402  (after flows.dask, which quiets it)
from docpilot.flows.dask import LOCAL_WORKERS, dask_task_runner, local_cluster_options
from docpilot.tasks.dask import turn_shares
from docpilot.tasks.dask_worker import HEARTBEAT_FAILED
from prefect_dask import DaskTaskRunner

from docpilot.assistant import workspace
from docpilot.errors import OrchestratorError, UsageError
from docpilot.models.base import Turn
from docpilot.progress import Progress
from docpilot.run import road
from docpilot.run.job import job_records
from tests.conftest import ROOT
from tests.support.evals import run_eval
from tests.support.model_stage import model_shard, retrieve_shard
from tests.support.openai_server import OpenAIScript, Reply, serve_openai
from tests.support.pipeline_jobs import PIPELINE, comparable, pipeline_job

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(prefect_api):
    """Two worker processes, shared by the runs of this module and named by address. (The
    cluster DocPilot starts itself when given no address is the command test's below.)"""
    with LocalCluster(**local_cluster_options()) as running:
        yield running.scheduler_address


@pytest.fixture(scope="module")
def dask_full(cluster, tmp_path_factory):
    """A full run (extractive model) on the cluster."""
    folder = tmp_path_factory.mktemp("dask-full")
    report = run_eval(pipeline_job(folder), runner="dask", dask_address=cluster)
    return folder, report


@pytest.fixture(scope="module")
def dask_gate(cluster, tmp_path_factory):
    """A gate-only run on the cluster."""
    folder = tmp_path_factory.mktemp("dask-gate")
    report = run_eval(pipeline_job(folder, gate_only=True), runner="dask", dask_address=cluster)
    return folder, report


def test_a_full_run_on_dask_matches_an_inline_run(dask_full, tmp_path):
    _, report = dask_full
    inline = run_eval(pipeline_job(tmp_path), "inline")
    assert report.orchestrator == "prefect"
    assert comparable(report) == comparable(inline)
    assert report.summary["answer_f1"] is not None
    assert all(row.cached == [] for row in report.rows)


def test_a_gate_only_run_on_dask_matches_an_inline_run(dask_gate, tmp_path):
    _, report = dask_gate
    inline = run_eval(pipeline_job(tmp_path, gate_only=True), "inline")
    assert report.gate_only and "answer_f1" not in report.summary
    assert comparable(report) == comparable(inline)


def test_the_flow_stored_every_result_the_workers_computed(dask_full, dask_gate):
    # An inline run over the same cache finds every stage of every record there.
    full_folder, full = dask_full
    again = run_eval(pipeline_job(full_folder), "inline")
    assert all(set(row.cached) == {"retrieve", "model"} for row in again.rows)
    assert comparable(again) == comparable(full)
    gate_folder, gate = dask_gate
    again = run_eval(pipeline_job(gate_folder, gate_only=True), "inline")
    assert all(row.cached == ["retrieve"] for row in again.rows)
    assert comparable(again) == comparable(gate)


def test_lookups_fill_in_what_is_stored_and_return_the_rest(tmp_path):
    job = pipeline_job(tmp_path)
    cached = workspace.open_workspace(job.config)
    bare = dataclasses.replace(cached, cache=None)  # what a worker has: the same index, no cache
    records = job_records(job)
    traces = road.start_traces(records)
    todo = road.lookup_rankings(cached, traces)
    assert todo == list(range(len(records)))
    road.store_rankings(cached, retrieve_shard(bare, [traces[p] for p in todo]))

    # The stored rankings are the ones the inline stage reads.
    inline = retrieve_shard(cached, road.start_traces(records))
    assert all(t.cached == ["retrieve"] for t in inline)
    fresh = road.start_traces(records)
    assert road.lookup_rankings(cached, fresh) == []
    assert [t.hits for t in fresh] == [t.hits for t in traces]
    assert road.lookup_rankings(cached, road.start_traces(records), refresh=True) == list(range(len(records)))

    primed = road.prime_shard(cached, fresh)
    todo = road.lookup_turns(cached, primed)
    assert todo == list(range(len(records)))
    answered = model_shard(bare, [primed[p] for p in todo])
    _store(cached, answered)

    def primed_again():
        return road.prime_shard(cached, retrieve_shard(cached, road.start_traces(records)))

    assert all("model" in t.cached for t in model_shard(cached, primed_again()))
    again = primed_again()
    assert road.lookup_turns(cached, again) == []
    assert [t.turn for t in again] == [t.turn for t in answered]


def _store(ws, traces) -> None:
    """Store each trace's turn as the model lane's writer does."""
    writer = road.TurnWriter(ws)
    for trace in traces:
        writer(trace)
    writer.close()


def test_errored_turns_are_not_stored(tmp_path):
    job = pipeline_job(tmp_path)
    ws = workspace.open_workspace(job.config)
    traces = road.prime_shard(ws, retrieve_shard(ws, road.start_traces(job_records(job)[:1])))
    traces[0].turn = Turn(answer="", error="timeout")
    _store(ws, traces)
    fresh = road.start_traces(job_records(job)[:1])
    assert road.lookup_turns(ws, road.prime_shard(ws, retrieve_shard(ws, fresh))) == [0]


def test_a_rerun_on_dask_with_every_turn_stored_needs_no_endpoint(cluster, tmp_path):
    # As a re-run in this process does: the endpoint is gone, every turn is in the cache,
    # so the workers re-score them and send nothing.
    (tmp_path / "docpilot.yaml").write_text("shard_size: 2\nmodel:\n  concurrency: 1\n")
    script = OpenAIScript(default=Reply(answer="Install Acme with pip install acme-cli [index#install]."))

    def eval_on_dask(base_url: str, out: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "docpilot", "eval", "--config", "docpilot.yaml", "--runner", "dask",
             "--dask-address", cluster, "--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"),
             "--provider", "openai", "--base-url", base_url, "--json", "--out", out],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )

    with serve_openai(script) as base_url:
        first = eval_on_dask(base_url, "first.json")
    assert first.returncode in (0, 1), first.stderr
    assert len(script.history) > 1
    again = eval_on_dask(base_url, "again.json")  # the server is gone: its port refuses
    assert again.returncode == first.returncode, again.stderr
    assert "cannot connect to the model endpoint" not in again.stderr
    rows = json.loads((tmp_path / "again.json").read_text())["rows"]
    before = json.loads((tmp_path / "first.json").read_text())["rows"]
    assert len(rows) == len(before) == 6 and all("model" in row["cached"] for row in rows if row["gold"])
    assert [row["answer"] for row in rows] == [row["answer"] for row in before]


def test_dask_runs_only_under_prefect(tmp_path):
    with pytest.raises(OrchestratorError, match="cannot run inline"):
        run_eval(pipeline_job(tmp_path), "inline", runner="dask")


def test_dask_does_not_run_the_server_runtime(tmp_path):
    job = pipeline_job(tmp_path).model_copy(update={"runtime": "server", "url": "http://127.0.0.1:9"})
    with pytest.raises(UsageError, match="--runtime server"):
        run_eval(job, "prefect", runner="dask")


def test_an_address_where_no_scheduler_answers_is_named(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OrchestratorError, match=f"--dask-address tcp://127.0.0.1:{port}: no Dask scheduler"):
        run_eval(pipeline_job(tmp_path), "prefect", runner="dask", dask_address=f"tcp://127.0.0.1:{port}")


def test_without_an_address_a_local_cluster_of_two_processes_is_started():
    runner = dask_task_runner()
    assert isinstance(runner, DaskTaskRunner) and runner.address is None and LOCAL_WORKERS == 2
    assert runner.cluster_kwargs == local_cluster_options()
    assert local_cluster_options() == {
        "n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": None,
        "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"}, "preload": ["docpilot.tasks.dask_worker"],
    }


@pytest.mark.parametrize("preload", [True, False], ids=["with-preload", "without"])
def test_workers_of_the_local_cluster_do_not_log_a_heartbeat_that_finds_no_scheduler(preload):
    # The cluster's scheduler can close while a worker's heartbeat is on its way; the
    # worker then logs the failure, tracebacks and all, after the verdict. Each worker here
    # sends its real heartbeat to a port nothing listens on. Without the preload the
    # same heartbeat is logged, which shows the test sees what it looks for.
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.heartbeat_to_nowhere", *([] if preload else ["--without-preload"])],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    logged = result.stderr.count(HEARTBEAT_FAILED)
    if preload:
        assert logged == 0 and "Traceback" not in result.stderr, result.stderr
    else:
        assert logged == LOCAL_WORKERS, result.stderr


def test_the_command_starts_and_stops_its_own_prefect_server_and_cluster(tmp_path):
    # No PREFECT_API_URL and no --dask-address: `docpilot eval --runner dask` starts a Prefect
    # server and a local cluster for the run, quietly, and leaves no process behind. Every
    # process it starts inherits the mark. Port 8787, Dask's default, is held (by this test
    # or by whatever holds it already): the cluster does not need it, nor warn about it.
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "home"), DOCPILOT_TEST_MARK=mark)
    with contextlib.ExitStack() as held:
        dashboard_port = held.enter_context(socket.socket())
        with contextlib.suppress(OSError):
            dashboard_port.bind(("0.0.0.0", 8787))
            dashboard_port.listen()
        result = subprocess.run(
            [sys.executable, "-m", "docpilot", "eval", "--runner", "dask", "--gate-only", "--json",
             "--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"),
             "--out", str(tmp_path / "report.json")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"] == "pass"
    for noise in ("Traceback", "ERROR", "8787"):
        assert noise not in result.stderr, result.stderr
    assert _processes_marked(mark) == []


def _processes_marked(mark: str) -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("DOCPILOT_TEST_MARK") == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _many_questions(folder) -> str:
    """Four variants of each answerable pipeline question: sixteen distinct prompts the gate lets through."""
    import yaml

    records = [r for r in yaml.safe_load((PIPELINE / "golden.yaml").read_text()) if r.get("gold")]
    many = [{**r, "id": f"{r['id']}-{n}", "question": f"{r['question']} (case {n})"} for r in records for n in range(4)]
    path = folder / "golden.yaml"
    path.write_text(yaml.safe_dump(many, sort_keys=False))
    return str(path)


# Regression: under --runner dask every worker kept model.concurrency turns in flight, so the
# endpoint saw the workers times the configured bound.
@pytest.mark.parametrize(("concurrency", "latency_s"), [(4, 0.4), (1, 0.05)], ids=["4-over-2", "1-over-2"])
def test_the_endpoint_sees_at_most_model_concurrency_turns_across_the_workers(cluster, tmp_path, concurrency,
                                                                              latency_s):
    script = OpenAIScript(default=Reply(answer="Install Acme with pip install acme-cli [1].", latency_s=latency_s))
    with serve_openai(script) as base_url:
        job = pipeline_job(tmp_path)
        config = job.config.model_copy(update={
            "golden": _many_questions(tmp_path),
            "model": job.config.model.model_copy(update={"provider": "openai", "base_url": base_url,
                                                          "concurrency": concurrency}),
        })
        job = job.model_copy(update={"config": config, "golden": config.golden})
        report = run_eval(job, runner="dask", dask_address=cluster)
    answered = [row for row in report.rows if not row.refused]
    assert len(answered) == 16 and all(row.error is None for row in answered)
    assert len(script.turns) == 16  # the endpoint's probe aside
    if concurrency == 4:  # both workers answered at once (more than one share), never above the bound
        assert 2 < script.peak_in_flight <= 4, script.peak_in_flight
    else:  # one turn: one worker answers every shard, one at a time
        assert script.peak_in_flight == 1


def test_the_concurrency_is_split_into_shares_that_add_up_to_it():
    workers = ["tcp://127.0.0.1:9002", "tcp://127.0.0.1:9001", "tcp://127.0.0.1:9003"]
    assert turn_shares(8, workers) == {"tcp://127.0.0.1:9001": 3, "tcp://127.0.0.1:9002": 3, "tcp://127.0.0.1:9003": 2}
    assert turn_shares(3, workers) == dict.fromkeys(sorted(workers), 1)
    # Fewer turns than workers: no worker is given 0, so only the first ones answer.
    assert turn_shares(2, workers) == {"tcp://127.0.0.1:9001": 1, "tcp://127.0.0.1:9002": 1}
    for total in range(1, 20):
        shares = turn_shares(total, workers)
        assert sum(shares.values()) == total and min(shares.values()) >= 1


class _Counts:
    """A progress sink that keeps each stage's total and how far it got."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}

    def start(self, stage: str, total: int) -> None:
        self.totals[stage] = total

    def advance(self, stage: str, count: int = 1) -> None:
        self.done[stage] = self.done.get(stage, 0) + count

    def close(self) -> None:
        pass


# Regression: under --runner dask the progress line's model count stopped at the records, not the samples.
def test_repeats_on_dask_give_the_inline_run_s_samples_and_count_each(cluster, tmp_path):
    inline = run_eval(pipeline_job(tmp_path / "inline", model={"repeat": 3}), "inline")
    counts = _Counts()
    report = run_eval(pipeline_job(tmp_path / "dask", model={"repeat": 3}), runner="dask", dask_address=cluster,
                      progress=Progress(counts))
    samples = [(r.id, r.sample, r.answer) for r in report.rows]
    assert len(samples) == 18 and [s for _, s, _ in samples] == [0, 1, 2] * 6
    assert samples == [(r.id, r.sample, r.answer) for r in inline.rows]
    assert comparable(report) == comparable(inline)
    assert report.stability == inline.stability and report.stability is not None
    assert (counts.totals["retrieve"], counts.totals["model"]) == (6, 18)
    assert (counts.done["retrieve"], counts.done["model"]) == (6, 18)
