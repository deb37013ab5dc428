"""Ctrl-C and SIGTERM end a command with one message and exit 130, however the interrupt travels."""

from __future__ import annotations

import os
import signal
import sys
import time
import weakref

import pytest

from docpilot.cli._errors import INTERRUPTED_EXIT, interrupts_resume


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(5)  # the handler raises long before this ends


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_block_with_exit_130_and_marks_the_run(signum, capsys, tmp_path):
    with pytest.raises(SystemExit) as ended, interrupts_resume() as stop:
        _signal_self(signum)
    assert ended.value.code == INTERRUPTED_EXIT
    assert stop.is_set()  # the run's stop flag: model stages that start after the signal stop at once
    assert "run the same command again to resume" in capsys.readouterr().err


def test_an_interrupt_that_comes_back_as_an_error_is_still_the_interrupt(capsys):
    # pydantic, serializing a turn when the signal lands, reports the KeyboardInterrupt
    # as a PydanticSerializationError: an error, not an interrupt.
    with pytest.raises(SystemExit) as ended, interrupts_resume():
        try:
            _signal_self(signal.SIGTERM)
        except KeyboardInterrupt as caught:
            raise ValueError(f"Error calling function `_ser_model`: {caught!r}") from None
    assert ended.value.code == INTERRUPTED_EXIT
    assert "resume" in capsys.readouterr().err


def test_an_error_without_a_signal_stays_an_error_and_the_handlers_are_restored():
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(ValueError, match="a bug"), interrupts_resume():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
        raise ValueError("a bug")
    assert {signum: signal.getsignal(signum) for signum in before} == before


class _Held:
    """An object whose weakref callback is where the signal lands."""


def test_a_signal_in_a_callback_python_cannot_raise_from_prints_no_traceback(capfd, monkeypatch, tmp_path):
    # The import system's module locks end in weakref callbacks: a SIGTERM landing there
    # has its KeyboardInterrupt reported as unraisable ("Exception ignored ... Traceback")
    # and dropped. The stop mark still ends the run, with the one message and no report.
    from docpilot.run.lane import Interrupted

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)  # Python's default prints the traceback
    with pytest.raises(SystemExit) as ended, interrupts_resume() as stop:
        held = _Held()
        ref = weakref.ref(held, lambda _: _signal_self(signal.SIGTERM))
        del held  # the callback runs here, and the signal lands in it
        assert ref() is None and stop.is_set()
        raise Interrupted("the run noticed the stop mark")
    assert ended.value.code == INTERRUPTED_EXIT
    assert reported == []
    assert "resume" in capfd.readouterr().err
    assert sys.unraisablehook == reported.append  # put back as it was
