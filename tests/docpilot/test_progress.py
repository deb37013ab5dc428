"""Progress: plain lines off a terminal, a bar on one, nothing on stdout."""

from __future__ import annotations

import io
import threading

import pytest
from click.testing import CliRunner

from docpilot import progress
from docpilot.cli import main
from tests.conftest import DATA


def test_plain_lines_each_tenth():
    stream = io.StringIO()
    sink = progress.LineSink(stream)
    sink.start("model", 20)
    for _ in range(20):
        sink.advance("model")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "model: 2/20 records" and lines[-1] == "model: 20/20 records"
    assert len(lines) == 10


def test_a_terminal_gets_a_bar_and_a_pipe_gets_lines():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    bar = progress.sink_for(Terminal())
    try:
        assert isinstance(bar, progress.BarSink)
    finally:
        bar.close()
    assert isinstance(progress.sink_for(io.StringIO()), progress.LineSink)


def test_a_closed_bar_leaves_no_thread_behind():
    # rich's refresh thread, left to end by itself, was still alive after a few in a hundred closes.
    before = threading.active_count()
    for _ in range(100):
        bar = progress.BarSink()
        bar.start("embed", 3)
        bar.advance("embed", 3)
        assert threading.active_count() == before + 1
        bar.close()
        assert threading.active_count() == before  # so a server that forks its workers may do so


def test_an_eval_reports_progress_on_stderr_only(tmp_path):
    pipeline = DATA / "pipeline"
    result = CliRunner().invoke(main, ["eval", "--docs", str(pipeline / "docs"), "--golden", str(pipeline / "golden.yaml"),
                                       "--orchestrator", "inline", "--out", str(tmp_path / "r.json"), "--json"])
    assert result.exit_code == 0
    assert "model: 6/6 records" in result.stderr and "retrieve: 6/6 records" in result.stderr
    assert "6/6 records" not in result.stdout


def test_a_stage_is_shown_under_the_label_the_run_gives_it():
    stream = io.StringIO()
    shown = progress.Progress(progress.LineSink(stream)).shown_as({"retrieve": "ask support-bot"})
    shown.start("retrieve", 1)
    shown.advance("retrieve")
    shown.start("embed", 1)  # a stage the labels do not name keeps its name
    shown.advance("embed")
    assert stream.getvalue().splitlines() == ["ask support-bot: 1/1 records", "embed: 1/1 chunks"]


# Regression: a run that asked a target said `retrieve` and `model`, which it never did itself.
def test_a_target_run_shows_the_target_asked_and_its_answers_scored(tmp_path):
    import yaml

    from tests.support.assistant_shapes import Script, serve_shapes

    pipeline = DATA / "pipeline"
    with serve_shapes(Script()) as base:
        target = {"url": f"{base}/rag/invoke", "body": {"input": {"question": "{question}"}},
                  "reply": {"answer": "output.answer", "sources": "output.context", "source_id": "metadata.source"}}
        config = tmp_path / "docpilot.yaml"
        config.write_text(yaml.safe_dump({"targets": {"support-bot": target}}))
        result = CliRunner().invoke(main, ["eval", "--config", str(config), "--docs", str(pipeline / "docs"),
                                           "--golden", str(pipeline / "golden.yaml"), "--target", "support-bot",
                                           "--orchestrator", "inline", "--out", str(tmp_path / "r.json"), "--json"])
    assert result.exit_code in (0, 1), result.output
    lines = result.stderr.splitlines()
    assert "ask support-bot: 6/6 records" in lines and "score: 6/6 records" in lines, lines
    assert not [line for line in lines if line.startswith(("retrieve:", "model:"))], lines


def test_a_long_stage_says_how_long_it_took_so_far_and_about_how_long_is_left():
    # An index built with MiniLM takes minutes: the log says when it will be done.
    now = [100.0]
    stream = io.StringIO()
    sink = progress.LineSink(stream, clock=lambda: now[0])
    sink.start("embed", 1000)
    now[0] += 1.0
    sink.advance("embed", 100)  # a second in: too early to tell
    now[0] += 19.0
    sink.advance("embed", 100)  # 200 in 20 s: 800 more take 80 s
    now[0] += 160.0
    sink.advance("embed", 400)  # 600 in 180 s: 400 more take 2 min
    sink.advance("embed", 400)
    assert stream.getvalue().splitlines() == [
        "embed: 100/1000 chunks",
        "embed: 200/1000 chunks, 20 s so far, about 1 min 20 s left",
        "embed: 600/1000 chunks, 3 min 0 s so far, about 2 min 0 s left",
        "embed: 1000/1000 chunks",
    ]


@pytest.mark.slow  # takes seconds
def test_the_bar_shows_the_time_left(tmp_path):
    # On a real terminal (a pseudo-terminal): rich's bar shows the time left as "-:--:--"
    # until it knows the rate, then as a countdown such as "0:00:01".
    import os
    import pty
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = (
        "import time\nfrom docpilot import progress\nbar = progress.sink_for()\nbar.start('embed', 4)\n"
        "for _ in range(3):\n    time.sleep(0.6)\n    bar.advance('embed')\ntime.sleep(0.3)\nbar.close()\n"
    )
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", script], stderr=follower, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "TERM": "xterm"})
    os.close(follower)
    shown = b""
    while True:
        try:
            piece = os.read(leader, 4096)
        except OSError:  # the terminal closed: the child is gone
            break
        if not piece:
            break
        shown += piece
    child.wait(timeout=30)
    os.close(leader)
    text = shown.decode(errors="replace")
    assert "-:--:--" in text  # the time left, before the rate is known
    assert "embed" in text and "3/4" in text
