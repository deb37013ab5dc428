"""`docpilot eval` against an endpoint that ignores max_tokens: error rows that name the cause, a small report, soon."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(answer="x" * 10_000_000, pieces=1, finish_reason="stop"), id="one-huge-delta"),
        pytest.param(Reply(answer="on and on ", endless=True), id="endless"),
    ],
)
# Regression: one 10 MB delta was scored as a 10 MiB answer, and an endless stream grew to gigabytes, report too.
def test_an_endpoint_that_ignores_max_tokens_gives_error_rows_and_a_small_report(tmp_path, reply) -> None:
    out = tmp_path / "report.json"
    script = OpenAIScript(default=reply)
    started = time.monotonic()
    with serve_openai(script) as base_url:
        result = CliRunner().invoke(main, [
            "eval", *BASE, "--provider", "openai", "--model", "scripted", "--base-url", base_url,
            "--no-cache", "--out", str(out),
        ])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output  # the run finished; its errors gate failed
    assert "Traceback" not in result.output
    report = json.loads(out.read_text())
    asked = [row for row in report["rows"] if row["refused_by"] != "gate"]
    assert asked and all(row["error_code"] == "reply_too_long" for row in asked)
    assert all("ran past max_tokens=512" in row["error"] for row in asked)
    assert out.stat().st_size < 200_000
    assert took < 20
