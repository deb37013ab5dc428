"""How `docpilot eval` ends as a process of its own: without the interpreter's teardown, with nothing lost.

The command exits straight after its exit handlers once the run is written. These run
it as a user does, in a fresh process, and read back what it left: its output, its
files, its cache entries, and under Prefect the flow run and task runs on the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import DATA, ROOT

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml")]


def _eval(tmp_path, *args: str, api: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DOCPILOT_CACHE_DIR=str(tmp_path / "cache"), PREFECT_HOME=str(tmp_path / "prefect-home"))
    if api:
        env["PREFECT_API_URL"] = api
    return subprocess.run([sys.executable, "-m", "docpilot", "eval", *BASE, *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=240)


def test_an_inline_run_leaves_its_output_its_files_and_its_cache(tmp_path):
    out, markdown = tmp_path / "report.json", tmp_path / "summary.md"
    first = _eval(tmp_path, "--out", str(out), "--markdown", str(markdown), "--json")
    assert first.returncode == 0, first.stderr
    payload = json.loads(first.stdout.split("\nmarkdown:")[0])  # the whole JSON, flushed before the exit
    assert payload["verdict"] == "pass" and payload["report"] == str(out)
    assert json.loads(out.read_text())["orchestrator"] == "inline"
    assert markdown.read_text().strip()
    # Every turn the first process stored is there for the next one.
    again = _eval(tmp_path, "--out", str(out), "--json")
    assert again.returncode == 0, again.stderr
    rows = json.loads(out.read_text())["rows"]
    answered = [r for r in rows if r.get("answer") is not None]
    assert answered and all("model" in r["cached"] for r in answered)


def test_a_failed_gate_still_exits_1(tmp_path):
    config = tmp_path / "strict.yaml"
    config.write_text('gates:\n  recall@1: "> 1"\n')
    proc = _eval(tmp_path, "--config", str(config), "--gate-only", "--out", str(tmp_path / "r.json"), "--json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "fail"


@pytest.fixture(scope="module")
def recording_server():
    """A Prefect server with its services, as `prefect server start` runs: it records task runs."""
    from docpilot.tasks.prefect_server import start_prefect_server

    server = start_prefect_server(services=True)
    try:
        yield server.url
    finally:
        server.stop()


def test_a_prefect_run_is_complete_on_the_server_after_the_command_exits(tmp_path, recording_server):
    out = tmp_path / "report.json"
    proc = _eval(tmp_path, "--out", str(out), "--json", api=recording_server)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["orchestrator"] == "prefect"
    # One shard of the six records (fewer than a round of turns), a task run down the
    # road, and the scorecard; the server records them from the events the command sent
    # before it exited.
    expected = sorted(["shard", "publish-scorecard"])
    deadline = time.monotonic() + 60
    while True:
        [flow_run] = httpx.post(f"{recording_server}/flow_runs/filter", json={"limit": 1}).json()
        task_runs = httpx.post(f"{recording_server}/task_runs/filter",
                               json={"flow_runs": {"id": {"any_": [flow_run["id"]]}}}).json()
        done = [t for t in task_runs if t["state_type"] == "COMPLETED"]
        if len(done) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert flow_run["state_type"] == "COMPLETED"
    assert sorted(t["name"].rsplit("-", 1)[0] for t in task_runs) == expected
    assert {t["state_type"] for t in task_runs} == {"COMPLETED"}
    artifacts = httpx.post(f"{recording_server}/artifacts/filter",
                           json={"artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}}).json()
    assert [a["key"] for a in artifacts] == ["docpilot-scorecard"]
