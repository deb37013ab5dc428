"""A signal that lands inside an import DocPilot must not cut waits for it, then stops the run in its one message."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

_PROGRAM = textwrap.dedent("""
    import os, signal, time
    from docpilot.cli._errors import interrupts_resume, signals_held

    with interrupts_resume():
        with signals_held():  # stands for Prefect's import, whose start-up swallows a KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(20):
                time.sleep(0.01)
            print("the held block ran to its end", flush=True)
        print("the run went on after the signal", flush=True)
""")


# Regression: a SIGTERM during Prefect's import was caught by Prefect's plugin loader and
# printed with a traceback, and the flow then failed loudly instead of stopping.
def test_a_signal_inside_a_held_block_lets_it_end_then_stops_in_one_message():
    done = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, (done.stdout, done.stderr)
    assert "the held block ran to its end" in done.stdout
    assert "the run went on" not in done.stdout
    assert "interrupted: every finished record is in the cache" in done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
