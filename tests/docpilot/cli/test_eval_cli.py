"""`docpilot eval` and `docpilot score` from the command line: output, reports and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import DATA, ROOT

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml")]


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_json_output_is_the_only_thing_on_stdout(tmp_path):
    out = tmp_path / "report.json"
    result = run("eval", *BASE, "--orchestrator", "inline", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"summary", "gates", "verdict", "report"}
    assert payload["verdict"] == "pass" and payload["report"] == str(out)
    report = json.loads(out.read_text())
    assert report["summary"] == payload["summary"] and len(report["rows"]) == 6
    for key in ("schema_version", "run_id", "created_at", "config", "fingerprints", "set", "split",
                "gate_only", "runtime", "rows", "summary", "gates", "verdict"):
        assert key in report


def test_scorecard_on_the_terminal(tmp_path):
    result = run("eval", *BASE, "--gate-only", "--split", "dev", "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 0
    assert "recall@8" in result.stdout and "verdict: pass" in result.stdout
    assert "answer_f1" not in result.stdout  # gate-only reports retrieval alone


def test_a_failed_gate_exits_1(tmp_path):
    config = tmp_path / "strict.yaml"
    config.write_text('gates:\n  recall@1: "> 1"\n')
    result = run("eval", "--config", str(config), *BASE, "--gate-only", "--out", str(tmp_path / "r.json"), "--json")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "fail"
    assert [g["passed"] for g in payload["gates"] if g["metric"] == "recall@1"] == [False]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--golden", "missing.yaml"], "missing.yaml"),
        (["--docs", "no-such-folder"], "no-such-folder"),
        (["--split", "train"], "train"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "r.json"
    base = dict(zip(BASE[::2], BASE[1::2], strict=True))
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [x for pair in base.items() for x in pair]
    result = run("eval", *flat, "--orchestrator", "inline", "--out", str(out))
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()
    assert "Traceback" not in result.output


def test_a_gold_entry_naming_no_section_is_refused(tmp_path):
    golden = tmp_path / "golden.yaml"
    golden.write_text("- id: q1\n  question: How do I install it?\n  gold: ['guide/instal#x']\n  split: dev\n")
    result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--gate-only")
    assert result.exit_code == 2
    assert "guide/instal#x" in result.output and "q1" in result.output


# Regression: `--target NAME --gate-only` was refused with a message about --runtime server,
# which the user never typed.
def test_gate_only_with_a_target_is_refused_naming_the_target(tmp_path):
    config = tmp_path / "targets.yaml"
    config.write_text("targets:\n  support-bot:\n    url: http://127.0.0.1:9/ask\n    reply:\n      answer: answer\n")
    out = tmp_path / "r.json"
    result = run("eval", "--config", str(config), *BASE, "--target", "support-bot", "--gate-only", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert "--target support-bot answers over HTTP" in result.output
    assert "run without --gate-only" in result.output and "--runtime" not in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_score_recomputes_the_summary_from_rows(tmp_path):
    out = tmp_path / "report.json"
    assert run("eval", *BASE, "--orchestrator", "inline", "--out", str(out)).exit_code == 0
    original = json.loads(out.read_text())
    tampered = dict(original, summary={"recall@8": 0.0})
    out.write_text(json.dumps(tampered))
    result = run("score", str(out), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["summary"] == original["summary"]


def test_score_of_a_file_that_is_not_a_report_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run("score", str(bad))
    assert result.exit_code == 2 and "bad.json" in result.output


@pytest.mark.slow
def test_a_prefect_run_is_quiet(tmp_path):
    """A full run through Prefect's temporary server: a scorecard, and nothing on stderr."""
    env = dict(os.environ, COLUMNS="120")  # the worker's Prefect home: its database may exist already
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "docpilot", "eval", *BASE, "--orchestrator", "prefect", "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "orchestrator prefect" in proc.stdout
    # Only the progress lines DocPilot prints itself: no Prefect logs, warnings or tracebacks.
    progress = r"((retrieve|model): \d+/\d+ records|embed: \d+/\d+ chunks)(, [\w ]+ so far, about [\w ]+ left)?"  # a slow stage's time left
    noise = [line for line in proc.stderr.splitlines() if not re.fullmatch(progress, line)]
    assert noise == []


@pytest.mark.slow
def test_an_unreachable_prefect_api_is_a_setup_error(tmp_path):
    env = dict(os.environ, PREFECT_API_URL="http://127.0.0.1:9/api")
    proc = subprocess.run(
        [sys.executable, "-m", "docpilot", "eval", *BASE, "--orchestrator", "prefect", "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=240,
    )
    assert proc.returncode == 2
    assert "cannot reach the Prefect API at http://127.0.0.1:9/api" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r.json").exists()
