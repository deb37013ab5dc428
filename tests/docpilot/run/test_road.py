"""The one road (docpilot/run/road.py): a stored run asks the endpoint nothing, and stops when told."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob
from docpilot.run.lane import Interrupted
from tests.conftest import ROOT
from tests.support.openai_server import OpenAIScript, Reply, serve_openai
from tests.support.pipeline_jobs import pipeline_job


def _demo(base_url: str, out, cache) -> subprocess.CompletedProcess:
    """The demo (a copy of the repository's docs and golden set, beside ``cache``) against the endpoint."""
    demo = cache.parent / "demo"
    if not demo.exists():  # a copy: the docs must stay as they are from one run to the next
        shutil.copytree(ROOT / "docs", demo / "docs")
        shutil.copy(ROOT / "evals" / "golden.yaml", demo / "golden.yaml")
    return subprocess.run(
        [sys.executable, "-m", "docpilot", "eval", "--docs", str(demo / "docs"), "--golden",
         str(demo / "golden.yaml"), "--orchestrator", "inline", "--provider", "openai", "--model", "scripted",
         "--base-url", base_url, "--out", str(out), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "DOCPILOT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow  # takes seconds
def test_an_unchanged_rerun_of_the_demo_sends_no_request_and_passes_with_the_endpoint_down(tmp_path):
    script = OpenAIScript(default=Reply(answer="Run `docpilot eval` [1]."))
    cache = tmp_path / "cache"
    with serve_openai(script) as base_url:
        first = _demo(base_url, tmp_path / "first.json", cache)
        assert first.returncode in (0, 1), first.stderr
        asked = len(script.history)
        assert asked > 1  # the turns
        again = _demo(base_url, tmp_path / "again.json", cache)
        assert again.returncode == first.returncode, again.stderr
        assert len(script.history) == asked  # not one request
    down = _demo(base_url, tmp_path / "down.json", cache)  # the server is gone: its port refuses
    assert down.returncode == first.returncode, down.stderr
    rows = json.loads((tmp_path / "down.json").read_text())["rows"]
    before = json.loads((tmp_path / "first.json").read_text())["rows"]
    assert [row["answer"] for row in rows] == [row["answer"] for row in before]
    assert all("model" in row["cached"] for row in rows if row["answer"] is not None and row["refused_by"] != "gate")


def test_a_run_sends_one_request_per_turn_and_none_when_every_turn_is_stored(tmp_path):
    script = OpenAIScript(default=Reply(answer="Install it with pip [1]."))
    with serve_openai(script) as base_url:
        job = _hosted(pipeline_job(tmp_path), base_url)
        report = evaluate(job)
        asked = [r for r in report.rows if r.answer is not None and r.refused_by != "gate"]
        assert len(script.history) == len(asked) > 0  # no probe: the first reply is read strictly instead
        assert all(r.body.get("stream") for r in script.history)
        before = len(script.history)
        evaluate(_hosted(pipeline_job(tmp_path), base_url))
        assert len(script.history) == before
        evaluate(_hosted(pipeline_job(tmp_path, gate_only=True), base_url))
        assert len(script.history) == before


def test_a_first_reply_that_refuses_the_key_stops_the_run_with_the_services_reason(tmp_path):
    from docpilot.errors import ConfigError

    script = OpenAIScript(default=Reply(status=401, error_message="Incorrect API key provided"))
    with serve_openai(script) as base_url, pytest.raises(ConfigError) as raised:
        evaluate(_hosted(pipeline_job(tmp_path), base_url))
    assert "Incorrect API key provided" in str(raised.value) and "HTTP 401" in str(raised.value)
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*.json"))


def test_an_endpoint_that_refuses_connections_stops_the_run(tmp_path):
    import socket

    from docpilot.errors import ConfigError

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = _hosted(pipeline_job(tmp_path), f"http://127.0.0.1:{port}/v1")
    model = job.config.model.model_copy(update={"retries": 0})
    with pytest.raises(ConfigError, match="cannot connect to the model endpoint"):
        evaluate(job.model_copy(update={"config": job.config.model_copy(update={"model": model})}))


@pytest.mark.slow  # takes seconds
def test_a_run_told_to_stop_ends_interrupted_before_its_report(tmp_path):
    script = OpenAIScript(default=Reply(answer="Install it with pip [1].", latency_s=0.3))
    stop = threading.Event()
    with serve_openai(script) as base_url:
        job = _hosted(pipeline_job(tmp_path), base_url)
        stopper = threading.Timer(0.5, stop.set)
        stopper.start()
        with pytest.raises(Interrupted):
            evaluate(job, interrupt=stop)
        stopper.join()
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*.json"))


def _hosted(job: EvalJob, base_url: str) -> EvalJob:
    model = job.config.model.model_copy(update={"provider": "openai", "name": "scripted", "base_url": base_url,
                                                "concurrency": 1})
    return job.model_copy(update={"config": job.config.model_copy(update={"model": model})})
