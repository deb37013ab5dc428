"""SIGTERM stops a Prefect-orchestrated eval in one message, and the next run resumes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import yaml

from tests.conftest import DATA, ROOT
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"


def test_a_terminated_prefect_run_says_so_without_a_traceback_and_resumes(prefect_api, tmp_path):
    script = OpenAIScript(default=Reply(latency_s=0.4))
    with serve_openai(script) as base_url:
        args = [sys.executable, "-m", "docpilot", "eval", "--docs", str(PIPELINE / "docs"),
                "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "prefect",
                "--provider", "openai", "--model", "scripted", "--base-url", base_url,
                "--concurrency", "1", "--out", str(tmp_path / "report.json"), "--json"]
        env = dict(os.environ, DOCPILOT_CACHE_DIR=str(tmp_path / "cache"), PREFECT_API_URL=prefect_api)
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(script.history) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)  # two turns answered, the third in flight (in a model task's thread)
        assert len(script.history) >= 3, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "run the same command again to resume" in stderr
        assert "Traceback" not in stderr and "Interrupted" not in stderr
        assert not (tmp_path / "report.json").exists()

        asked = len(script.history)
        rerun = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        new_calls = len(script.history) - asked
    assert rerun.returncode in (0, 1), rerun.stderr
    rows = yaml.safe_load((tmp_path / "report.json").read_text())["rows"]
    reused = sum("model" in row["cached"] for row in rows)
    assert reused >= 1 and reused + new_calls == 6
