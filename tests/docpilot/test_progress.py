"""Progress: plain lines off a terminal, a bar on one, nothing on stdout."""

from __future__ import annotations

import io
import threading

from click.testing import CliRunner

from docpilot.cli import main
from docpilot import progress
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
