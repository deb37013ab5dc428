"""The local provider against llama.cpp's real server and SmolLM2-135M-Instruct.

These run a real LLM on the CPU, so they keep to a few short turns. They skip only when
the ``local`` extra is not installed; ``make test`` installs it. The server as DocPilot
runs it is the test process's (``llama_server``); the eval starts and stops its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from urllib.parse import urlsplit

from docpilot.models.base import Prompt, parse_refusal
from docpilot.models.openai import OpenAIModel
from tests.conftest import DATA, ROOT
from tests.support.llama_server import NAME, THREADS, default_server, needs_local

pytestmark = needs_local

QUESTIONS = ["Name one colour.", "Name one fruit.", "Name one animal."]
TIMEOUT_S = 240.0  # a busy 2-core machine runs one turn at a time, slowly


def _prompt(question: str) -> Prompt:
    return Prompt(question=question, messages=[{"role": "user", "content": question}])


async def _ask_all(base_url: str, questions: list[str], *, max_tokens: int):
    async with OpenAIModel(base_url=base_url, model=NAME, max_tokens=max_tokens, timeout_s=TIMEOUT_S,
                           retries=0) as model:
        return await asyncio.gather(*(model.complete(_prompt(q)) for q in questions))


def test_the_server_computes_with_the_threads_it_is_given() -> None:
    from docpilot.models.local import server_command

    command = server_command(ROOT / "model.gguf", 8080, name=NAME, seed=0, threads=1)
    assert command[command.index("--n_threads") + 1] == command[command.index("--n_threads_batch") + 1] == "1"
    every = server_command(ROOT / "model.gguf", 8080, name=NAME, seed=0)
    assert every[every.index("--n_threads") + 1] == str(os.cpu_count())


# Regression: with its defaults llama.cpp's server ends a turn in flight when the next request
# arrives ([DONE] with no finish_reason); such turns were stored and scored as empty answers.
def test_the_servers_default_interruptions_become_errors_never_answers() -> None:
    with default_server() as base_url:
        # Turns long enough to be in flight when the next request arrives.
        turns = asyncio.run(_ask_all(base_url, QUESTIONS, max_tokens=24))
    interrupted = [t for t in turns if t.error is not None]
    assert interrupted, "the server finished every turn; it should interrupt all but the last"
    for turn in interrupted:
        assert "no finish_reason" in turn.error and "--interrupt_requests False" in turn.error
    for turn in turns:
        assert (turn.error is None) == (turn.finish_reason is not None)


def test_the_honest_server_finishes_every_turn_and_times_its_first_token(llama_server) -> None:
    # Short turns, each still queued behind the one before.
    turns = asyncio.run(_ask_all(llama_server, QUESTIONS, max_tokens=8))
    assert [t.error for t in turns] == [None, None, None]
    for turn in turns:
        assert turn.finish_reason in ("stop", "length") and turn.answer.strip()
        assert turn.truncated == (turn.finish_reason == "length")
        assert 0 < turn.first_token_ms <= turn.latency_ms
    # One request at a time: the later turns waited for the earlier ones, and their first
    # token shows the queue.
    assert max(t.first_token_ms for t in turns) > min(t.latency_ms for t in turns)


def test_refusals_as_a_small_model_writes_them_are_read() -> None:
    # SmolLM2 was seen writing the protocol line in its own case and closing a code fence
    # it never opened.
    assert parse_refusal("Refuse: not-answerable\n```") == "not-answerable"
    assert parse_refusal("```\nREFUSE: out-of-scope\n```") == "out-of-scope"
    assert parse_refusal("**REFUSE:** unsafe") == "unsafe"
    assert parse_refusal("I refuse: to answer") is None


def test_an_eval_with_the_local_provider_runs_end_to_end_and_stops_its_server(tmp_path) -> None:
    config = tmp_path / "local.yaml"
    config.write_text(
        "prime:\n  top_k: 2\n"
        f"model:\n  max_tokens: 12\n  timeout_s: {TIMEOUT_S}\n"
        f"cache_dir: {tmp_path / 'cache'}\nreports_dir: {tmp_path / 'reports'}\n"
    )
    out = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "docpilot", "eval", "--config", str(config), "--provider", "local",
        "--docs", str(DATA / "pipeline" / "docs"), "--golden", str(DATA / "pipeline" / "golden.yaml"),
        "--split", "dev", "--orchestrator", "inline", "--out", str(out),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode in (0, 1), result.stderr  # a gate may fail: SmolLM2 seldom cites
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert len(rows) == 3 and [r["error"] for r in rows] == [None, None, None]
    for row in rows:
        assert row["answer"] is not None and row["latency_ms"] > 0
        if not row["refused"]:
            assert 0 < row["first_token_ms"] <= row["latency_ms"]
    assert report["config"]["model"]["provider"] == "local"
    assert report["config"]["model"]["concurrency"] == 1  # one request at a time: no queue measured
    assert report["config"]["model"]["threads"] == THREADS  # DOCPILOT_MODEL__THREADS, as the suite sets it
    assert "verdict:" in result.stdout
    # The server was stopped with the run: nothing listens on its port any more.
    port = urlsplit(report["config"]["model"]["base_url"] or "http://127.0.0.1:1").port
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
