"""`docpilot eval` runs stopped mid-way by a signal, and their re-runs, against the scripted model server."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.support.openai_server import OpenAIScript

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tests" / "data" / "pipeline"


def eval_args(base_url: str, out: Path, orchestrator: str) -> list[str]:
    """The command: the six pipeline records, one model call at a time, to ``base_url``."""
    return [sys.executable, "-m", "docpilot", "eval", "--docs", str(PIPELINE / "docs"),
            "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", orchestrator,
            "--provider", "openai", "--model", "scripted", "--base-url", base_url,
            "--concurrency", "1", "--out", str(out), "--json"]


def turns_asked(script: OpenAIScript) -> int:
    """The model turns the server was asked for, leaving out the endpoint probe each run sends first."""
    return sum(1 for request in list(script.history) if request.body.get("stream"))


def stop_after(script: OpenAIScript, args: list[str], env: dict, requests: int, signum: int) -> tuple[int, str]:
    """Start the command, send ``signum`` once the server has been asked ``requests`` turns; its exit code and stderr."""
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while turns_asked(script) < requests and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert turns_asked(script) >= requests, proc.communicate()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr


def resume(script: OpenAIScript, args: list[str], env: dict, out: Path) -> tuple[int, int]:
    """Run the command again to its end; how many rows reused a cached turn, and how many calls it made."""
    asked = turns_asked(script)
    rerun = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert rerun.returncode in (0, 1), rerun.stderr
    rows = yaml.safe_load(out.read_text())["rows"]
    return sum("model" in row["cached"] for row in rows), turns_asked(script) - asked

