"""Progress of a long run: a bar on a terminal, plain lines elsewhere, nothing when nobody asked.

The pipeline reports what it finished (``advance``); the command line decides how to
show it by installing a sink. Progress always goes to stderr, so ``--json`` output on
stdout stays clean.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Protocol, TextIO


class Sink(Protocol):
    """Where progress goes."""

    def start(self, stage: str, total: int) -> None: ...
    def advance(self, stage: str, count: int = 1) -> None: ...
    def close(self) -> None: ...


_sink: Sink | None = None
_UNITS = {"embed": "chunks"}  # what a stage counts, when not records


def install(sink: Sink | None) -> None:
    """Send progress to ``sink`` (None: nowhere)."""
    global _sink
    _sink = sink


@contextlib.contextmanager
def shown() -> Iterator[None]:
    """Show progress on stderr while in the block (see ``sink_for``), then put the sink away."""
    sink = sink_for()
    install(sink)
    try:
        yield
    finally:
        install(None)
        sink.close()


@contextlib.contextmanager
def muted() -> Iterator[None]:
    """Count nothing while in the block: work done ahead of the run's stages, which count it themselves."""
    global _sink
    sink, _sink = _sink, None
    try:
        yield
    finally:
        _sink = sink


def start(stage: str, total: int) -> None:
    """A stage is about to process ``total`` records."""
    if _sink is not None:
        _sink.start(stage, total)


def advance(stage: str, count: int = 1) -> None:
    """``count`` more records finished ``stage``."""
    if _sink is not None:
        _sink.advance(stage, count)


class LineSink:
    """Plain lines for logs and CI: one per stage each time another tenth is done."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._totals: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._shown: dict[str, int] = {}

    def start(self, stage: str, total: int) -> None:
        self._totals[stage] = total
        self._done.setdefault(stage, 0)
        self._shown.setdefault(stage, 0)

    def advance(self, stage: str, count: int = 1) -> None:
        total = self._totals.get(stage) or 0
        done = self._done[stage] = self._done.get(stage, 0) + count
        tenth = done * 10 // total if total else 10
        if tenth > self._shown.get(stage, -1):
            self._shown[stage] = tenth
            print(f"{stage}: {done}/{total} {_UNITS.get(stage, 'records')}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class BarSink:
    """A rich progress bar per stage, on the terminal's stderr; it disappears when done."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True,
        )
        self._tasks: dict[str, int] = {}
        self._progress.start()

    def start(self, stage: str, total: int) -> None:
        if stage in self._tasks:
            self._progress.update(self._tasks[stage], total=total)
        else:
            self._tasks[stage] = self._progress.add_task(stage, total=total)

    def advance(self, stage: str, count: int = 1) -> None:
        if stage in self._tasks:
            self._progress.advance(self._tasks[stage], count)

    def close(self) -> None:
        # rich asks its refresh thread to end without waiting for it. Wait here: `docpilot
        # serve` forks its workers only when no other thread runs.
        refresher = getattr(self._progress.live, "_refresh_thread", None)
        self._progress.stop()
        if refresher is not None:
            refresher.join()


def sink_for(stream: TextIO | None = None) -> Sink:
    """A bar when ``stream`` (stderr by default) is a terminal, plain lines otherwise."""
    stream = stream or sys.stderr
    return BarSink() if stream.isatty() else LineSink(stream)
