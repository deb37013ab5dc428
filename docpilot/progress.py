"""Progress of a long run: a bar on a terminal, plain lines elsewhere, nothing when nobody asked.

The pipeline reports what it finished (``advance``); the command line decides how to
show it by giving a sink. Each eval counts into its own ``Progress``; work outside a
run (building an index) counts into the calling thread's. Progress always goes to stderr, so ``--json`` output on
stdout stays clean.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Protocol, TextIO


class Sink(Protocol):
    """Where progress goes."""

    def start(self, stage: str, total: int) -> None: ...
    def advance(self, stage: str, count: int = 1) -> None: ...
    def close(self) -> None: ...


_UNITS = {"embed": "chunks"}  # what a stage counts, when not records


class Progress:
    """One run's counts, sent to a sink (or nowhere); muted on a thread for work others count.

    Each eval has its own (``docpilot.run.context``), so two evals in one process count
    apart. Its stages advance it from any thread: the model lane's writer, a stage pool.
    ``labels`` says what the sink shows for a stage the run names otherwise: a run that
    asks a target counts its ``retrieve`` and ``model`` stages as ``ask NAME`` and ``score``.
    """

    def __init__(self, sink: Sink | None = None, labels: Mapping[str, str] | None = None) -> None:
        self.sink = sink
        self.labels = dict(labels or {})
        self._quiet = threading.local()

    def shown_as(self, labels: Mapping[str, str]) -> Progress:
        """This progress's sink, with the stages ``labels`` names shown under those labels."""
        return Progress(self.sink, {**self.labels, **labels}) if labels else self

    def start(self, stage: str, total: int) -> None:
        """A stage is about to process ``total`` records."""
        if self.sink is not None and not getattr(self._quiet, "on", False):
            self.sink.start(self.labels.get(stage, stage), total)

    def advance(self, stage: str, count: int = 1) -> None:
        """``count`` more records finished ``stage``."""
        if self.sink is not None and not getattr(self._quiet, "on", False):
            self.sink.advance(self.labels.get(stage, stage), count)

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """Count nothing on this thread in the block: work done ahead of the run's stages, which count it themselves."""
        before = getattr(self._quiet, "on", False)
        self._quiet.on = True
        try:
            yield
        finally:
            self._quiet.on = before


# The progress of whatever the calling thread is doing outside a run's stages (building
# an index for `docpilot index`, `serve` or a job): set by ``shown`` or ``install``.
_CURRENT: ContextVar[Progress | None] = ContextVar("docpilot_progress", default=None)


def current() -> Progress:
    """The calling thread's progress (``shown``, ``install``), or one that counts nowhere."""
    return _CURRENT.get() or Progress()


def install(sink: Sink | None) -> None:
    """Send the calling thread's progress to ``sink`` (None: nowhere)."""
    _CURRENT.set(Progress(sink) if sink is not None else None)


@contextlib.contextmanager
def shown(sink: Sink | None = None) -> Iterator[Progress]:
    """Show the calling thread's progress while in the block (on stderr by default, see ``sink_for``)."""
    sink = sink or sink_for()
    shown = Progress(sink)
    token = _CURRENT.set(shown)
    try:
        yield shown
    finally:
        _CURRENT.reset(token)
        sink.close()


@contextlib.contextmanager
def counting(progress: Progress) -> Iterator[None]:
    """Within the block, this thread's ``start`` and ``advance`` go to ``progress`` (a run's stage)."""
    token = _CURRENT.set(progress)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def start(stage: str, total: int) -> None:
    """A stage of the calling thread's work is about to process ``total`` records."""
    progress = _CURRENT.get()
    if progress is not None:
        progress.start(stage, total)


def advance(stage: str, count: int = 1) -> None:
    """``count`` more records of the calling thread's work finished ``stage``."""
    progress = _CURRENT.get()
    if progress is not None:
        progress.advance(stage, count)


class LineSink:
    """Plain lines for logs and CI: one per stage each time another tenth is done.

    A stage that has run for ``ETA_AFTER_S`` or more (building an index with a local
    embedder takes minutes) also says how long it has taken and about how long is left,
    at the rate so far: ``embed: 2560/13194 chunks, 41 s so far, about 2 min 50 s left``.
    """

    ETA_AFTER_S = 2.0

    def __init__(self, stream: TextIO | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self._clock = clock
        self._totals: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._shown: dict[str, int] = {}
        self._began: dict[str, float] = {}

    def start(self, stage: str, total: int) -> None:
        self._totals[stage] = total
        self._done.setdefault(stage, 0)
        self._shown.setdefault(stage, 0)
        self._began.setdefault(stage, self._clock())

    def advance(self, stage: str, count: int = 1) -> None:
        total = self._totals.get(stage) or 0
        done = self._done[stage] = self._done.get(stage, 0) + count
        tenth = done * 10 // total if total else 10
        if tenth > self._shown.get(stage, -1):
            self._shown[stage] = tenth
            line = f"{stage}: {done}/{total} {_UNITS.get(stage, 'records')}"
            elapsed = self._clock() - self._began.get(stage, self._clock())
            if elapsed >= self.ETA_AFTER_S and 0 < done < total:
                line += f", {_duration(elapsed)} so far, about {_duration(elapsed / done * (total - done))} left"
            print(line, file=self.stream, flush=True)

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
            TimeRemainingColumn,
        )

        # Elapsed, then what is left at the rate so far: an index built with a local embedder takes minutes.
        self._progress = Progress(
            TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TimeRemainingColumn(), console=Console(stderr=True), transient=True,
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


def _duration(seconds: float) -> str:
    """A time as a person reads it: ``8 s``, ``2 min 50 s``, ``1 h 5 min``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def sink_for(stream: TextIO | None = None) -> Sink:
    """A bar when ``stream`` (stderr by default) is a terminal, plain lines otherwise."""
    stream = stream or sys.stderr
    return BarSink() if stream.isatty() else LineSink(stream)
