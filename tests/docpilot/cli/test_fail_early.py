"""`docpilot eval` stops before the first record on what would fail every record, and groups
the faults of a run by cause before the scorecard."""

from __future__ import annotations

import json
import socket
import time

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.config.model import ModelConfig
from tests.conftest import DATA
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]
KEY = "sk-test-fail-early-0123456789"


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)


# Regression: a misspelt gate was found only after every record had been answered.
def test_a_misspelt_gate_metric_exits_2_before_any_model_call(tmp_path, openai_server) -> None:
    base_url, script = openai_server
    script.reset()
    config = tmp_path / "gates.yaml"
    config.write_text('gates:\n  recal@8: ">= 0.8"\n')
    result = run("eval", "--config", str(config), *BASE, "--provider", "openai", "--base-url", base_url,
                 "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "unknown metric 'recal@8'" in result.output and "did you mean 'recall@8'" in result.output
    assert "answer_f1" in result.output  # the valid ids are listed
    assert script.history == [] and not (tmp_path / "r.json").exists()


def test_an_unreadable_gate_condition_exits_2(tmp_path) -> None:
    config = tmp_path / "gates.yaml"
    config.write_text('gates:\n  recall@8: "at least 0.8"\n')
    result = run("eval", "--config", str(config), *BASE, "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2 and "cannot read the condition" in result.output


# Regression: a run against a 401 endpoint spent the whole golden set and scored 0s.
def test_a_401_endpoint_stops_the_run_with_exit_2_and_the_services_reason(tmp_path, openai_server) -> None:
    base_url, script = openai_server
    script.reset(Reply.failure(401, f"Incorrect API key provided: {KEY}."))
    result = run("eval", *BASE, "--provider", "openai", "--base-url", base_url, "--out", str(tmp_path / "r.json"),
                 env={"DOCPILOT_API_KEY": KEY})
    assert result.exit_code == 2
    assert "HTTP 401" in result.output and "Incorrect API key provided" in result.output
    assert "DOCPILOT_API_KEY" in result.output  # the fix
    assert KEY not in result.output
    # No probe: the run's first reply is read strictly; at most the first round of turns went out.
    assert len(script.history) <= ModelConfig().concurrency and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("status", [403, 404])
def test_403_and_404_stop_the_run_too(tmp_path, openai_server, status: int) -> None:
    base_url, script = openai_server
    script.reset(Reply.failure(status, "no such model"))
    result = run("eval", *BASE, "--provider", "openai", "--base-url", base_url, "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2 and f"HTTP {status}" in result.output and "no such model" in result.output
    assert 1 <= len(script.history) <= ModelConfig().concurrency


@pytest.mark.slow  # takes seconds
def test_a_refused_connection_stops_the_run(tmp_path) -> None:
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run("eval", *BASE, "--provider", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                 "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2 and "cannot connect" in result.output and "--base-url" in result.output


def test_a_broken_golden_set_is_reported_without_waiting_for_a_silent_endpoint(tmp_path) -> None:
    # The probe goes out while the golden set is read; a golden set that cannot be read is
    # reported at once, not after the probe's timeout against a server that never answers.
    golden = tmp_path / "golden.yaml"
    golden.write_text("- id: one\n  question: [unclosed\n")
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--orchestrator", "inline",
                     "--provider", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                     "--out", str(tmp_path / "r.json"))
        elapsed = time.monotonic() - started
    assert result.exit_code == 2 and "golden.yaml" in result.output and "YAML" in result.output
    assert elapsed < 10, f"waited {elapsed:.1f} s for an endpoint that never answers"
    assert not (tmp_path / "r.json").exists()


def test_faults_are_grouped_by_cause_before_the_scorecard(tmp_path, openai_server) -> None:
    # The probe is answered; every turn of the run then ends unfinished, as llama.cpp's
    # server ends them when the next request arrives.
    base_url, script = openai_server
    script.reset(Reply(answer="Set the token in the header [1].", interrupt_after_words=3))
    result = run("eval", *BASE, "--provider", "openai", "--base-url", base_url, "--no-cache",
                 "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 1
    output = result.output
    faults = output.index("errors:")
    assert faults < output.index("scorecard")
    assert "× the service ended turns without finishing them (no finish_reason)" in output
    assert "--interrupt_requests False" in output[faults:output.index("scorecard")]
    report = json.loads((tmp_path / "r.json").read_text())
    answered = [row for row in report["rows"] if row["error"] is None and row["refused_by"] != "gate"]
    assert answered == []  # no cut turn is scored as an answer
    assert report["summary"]["answer_f1"] is None


def test_with_json_the_faults_go_to_stderr_and_the_json_stays_whole(tmp_path, openai_server) -> None:
    base_url, script = openai_server
    script.reset(Reply(answer="Set the token in the header [1].", interrupt_after_words=3))
    result = run("eval", *BASE, "--provider", "openai", "--base-url", base_url, "--no-cache", "--json",
                 "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["verdict"] == "fail"  # stdout holds the JSON alone
    assert "errors:" in result.stderr and "no finish_reason" in result.stderr
    rescored = run("score", str(tmp_path / "r.json"), "--json")
    assert json.loads(rescored.stdout)["verdict"] == "fail" and "errors:" in rescored.stderr


def test_a_rerun_with_every_turn_stored_needs_no_endpoint(tmp_path) -> None:
    # Shards of two: every shard finds its turns stored, so no turn is sent and the endpoint,
    # gone by then, is never asked anything (not even the probe).
    config = tmp_path / "docpilot.yaml"
    config.write_text("shard_size: 2\nmodel:\n  concurrency: 1\n")
    script = OpenAIScript(default=Reply(answer="Install Acme with pip install acme-cli [index#install]."))
    with serve_openai(script) as base_url:
        args = ["eval", "--config", str(config), *BASE, "--provider", "openai", "--base-url", base_url, "--json"]
        first = run(*args, "--out", str(tmp_path / "first.json"))
    assert first.exit_code in (0, 1) and len(script.history) > 1
    again = run(*args, "--out", str(tmp_path / "again.json"))  # the server is gone: its port refuses
    assert again.exit_code == first.exit_code, again.output
    assert "cannot connect to the model endpoint" not in again.stderr
    rows = json.loads((tmp_path / "again.json").read_text())["rows"]
    assert len(rows) == 6 and all("model" in row["cached"] for row in rows if row["gold"])
    before = json.loads((tmp_path / "first.json").read_text())["rows"]
    assert [row["answer"] for row in rows] == [row["answer"] for row in before]
