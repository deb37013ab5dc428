"""SIGTERM stops a Prefect-orchestrated eval in one message, and the next run resumes it."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.interrupted_runs import eval_args, resume, stop_after
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

pytestmark = pytest.mark.slow


def test_a_terminated_prefect_run_says_so_without_a_traceback_and_resumes(prefect_api, tmp_path):
    script = OpenAIScript(default=Reply(latency_s=0.4))
    out = tmp_path / "report.json"
    with serve_openai(script) as base_url:
        args = eval_args(base_url, out, "prefect")
        env = dict(os.environ, DOCPILOT_CACHE_DIR=str(tmp_path / "cache"), PREFECT_API_URL=prefect_api)
        # Two turns answered, the third in flight (in a model task's thread).
        code, stderr = stop_after(script, args, env, 3, signal.SIGTERM)
        assert code == 130 and "run the same command again to resume" in stderr
        assert "Traceback" not in stderr and "Interrupted" not in stderr
        assert not out.exists()
        reused, new_calls = resume(script, args, env, out)
    assert reused >= 1 and reused + new_calls == 6
