"""``evaluate(job)``: one eval from Python as from the CLI, and evals side by side in one process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading

import pytest

from docpilot.config.loading import load_config
from docpilot.models.registry import flag_overrides
from docpilot.progress import LineSink, Progress
from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob, build_job, job_records
from docpilot.schema import Report, Selection
from tests.conftest import DATA, ROOT
from tests.support.llama_server import needs_local
from tests.support.pipeline_jobs import comparable, pipeline_job

TIMEOUT_S = 240.0  # a busy 2-core machine runs one turn of SmolLM2 at a time, slowly


@needs_local
def test_evaluate_with_the_local_provider_gives_the_clis_report(tmp_path):
    # Regression: the probe, the local provider's server and the lead lived in the CLI, so
    # a `local` run through the Python API failed ("the local provider's server is not running").
    def config_file(name: str):
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            "prime:\n  top_k: 2\n"
            f"model:\n  max_tokens: 12\n  timeout_s: {TIMEOUT_S}\n"
            f"cache_dir: {tmp_path / name / 'cache'}\nreports_dir: {tmp_path / name / 'reports'}\n"
        )
        return path

    docs, golden = DATA / "pipeline" / "docs", DATA / "pipeline" / "golden.yaml"
    out = tmp_path / "cli.json"
    command = [
        sys.executable, "-m", "docpilot", "eval", "--config", str(config_file("cli")), "--provider", "local",
        "--docs", str(docs), "--golden", str(golden), "--split", "dev", "--orchestrator", "inline",
        "--out", str(out),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode in (0, 1), result.stderr  # a gate may fail: SmolLM2 seldom cites
    cli = Report.model_validate(json.loads(out.read_text()))

    # The same run from Python, with its own cache: every turn is asked again, of a server
    # evaluate() starts and stops itself.
    overrides = flag_overrides(docs=str(docs), provider="local")
    overrides["golden"] = str(golden)
    job = build_job(load_config(str(config_file("api")), overrides=overrides), split="dev")
    report = evaluate(job)

    assert [row.error for row in report.rows] == [None, None, None]
    assert comparable(report) == comparable(cli)
    assert report.verdict == cli.verdict and report.config["model"]["provider"] == "local"


def _demo_job(folder) -> EvalJob:
    job = pipeline_job(folder)
    config = job.config.model_copy(update={
        "corpus": job.config.corpus.model_copy(update={"docs": str(ROOT / "docs")}),
        "golden": str(ROOT / "evals" / "golden.yaml"),
    })
    return EvalJob(config=config, golden=config.golden, selection=Selection(limit=16))


@pytest.mark.slow  # takes seconds
def test_two_evaluations_at_once_in_one_process_keep_apart(tmp_path):
    # Each run's lane, scores so far, lead, workspace and progress are its own: run side by
    # side on two threads, over other docs and golden sets, each gives the report it
    # gives alone, and counts only its own records.
    jobs = {"pipeline": lambda f: pipeline_job(f), "demo": _demo_job}
    alone = {name: comparable(evaluate(make(tmp_path / "alone" / name))) for name, make in jobs.items()}

    reports: dict[str, Report] = {}
    counted = {name: io.StringIO() for name in jobs}
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(name: str) -> None:
        try:
            job = jobs[name](tmp_path / "together" / name)  # fresh caches: every stage computes
            start.wait(timeout=30)
            reports[name] = evaluate(job, progress=Progress(LineSink(counted[name])))
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(name,)) for name in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    for name in jobs:
        assert comparable(reports[name]) == alone[name], name
        assert not any(row.cached for row in reports[name].rows)
    assert len(reports["pipeline"].rows) == 6 and len(reports["demo"].rows) == 16
    assert "retrieve: 6/6 records" in counted["pipeline"].getvalue()
    assert "retrieve: 16/16 records" in counted["demo"].getvalue()
    assert "16" not in counted["pipeline"].getvalue() and "/6 " not in counted["demo"].getvalue()


def test_a_run_whose_first_shard_is_one_round_of_turns_loses_no_record(tmp_path):
    # Regression: the run took the first shards (cut with the model's concurrency) by
    # position, and a config that cut them elsewhere left records 12 to 15 out of the
    # report, silently. Every shard, however cut, now travels the one road.
    from tests.support.latency_server import serve_latency_process
    from tests.support.openai_server import Reply

    with serve_latency_process(Reply(latency_s=0.05, numbered=True)) as url:
        job = _demo_job(tmp_path)
        model = job.config.model.model_copy(update={"provider": "openai", "name": "bench", "base_url": url,
                                                    "concurrency": 4})
        job = job.model_copy(update={"config": job.config.model_copy(update={"shard_size": 8, "model": model})})
        report = evaluate(job)
    assert [row.id for row in report.rows] == [record.id for record in job_records(job)]
    assert len(report.rows) == 16 and all(row.error is None for row in report.rows)
    assert report.path is not None and Report.model_validate_json(open(report.path).read()).run_id == report.run_id
