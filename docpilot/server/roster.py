"""The workers of a server and their figures, in memory every worker process shares, so any one can report them all.

``/healthz`` reaches one worker process, the one whose socket took the connection;
the figures of one process alone say nothing of a sibling that is busy, or dead. So
the table lives in an anonymous shared mapping made before the workers are forked:
each worker writes its own row (questions in flight, waiting, turned away, its share
of the slots) as they change, the first process writes how a worker ended and how
often it was started again, and any worker reads every row.

A row's state is ``starting`` from the fork until the worker's app has started,
``up`` while it serves, and ``down`` from its end until its restart. A row whose
process no longer runs is reported ``down`` whatever it says, so the report is honest
even in the moment before the first process notices the death.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import signal
from pathlib import Path
from typing import Protocol

from docpilot.api.schema import HealthTotals, WorkerHealth

_DOWN, _STARTING, _UP = 0, 1, 2
_STATES = {_DOWN: "down", _STARTING: "starting", _UP: "up"}
_NEVER = -1
"""``exit_status`` of a worker that never ended."""


class _Row(ctypes.Structure):
    # Whole 64-bit fields: each is written by one process with one store, so a reader never sees half of it.
    _fields_ = [
        (name, ctypes.c_int64)
        for name in (
            "pid", "state", "in_flight", "waiting", "capacity", "turned_away", "restarts", "exit_status",
            "finished", "cut",
        )
    ]


class _Figures(Protocol):
    limit: int
    in_flight: int
    turned_away: int

    @property
    def waiting(self) -> int: ...


class Roster:
    """The shared table of a server's workers; make it before the workers are forked."""

    def __init__(self, workers: int) -> None:
        self._memory = mmap.mmap(-1, ctypes.sizeof(_Row) * workers)  # anonymous and shared across fork
        self._rows = (_Row * workers).from_buffer(self._memory)
        for row in self._rows:
            row.exit_status = _NEVER

    def __len__(self) -> int:
        return len(self._rows)

    def starting(self, index: int) -> None:
        """The first process is about to fork worker ``index``."""
        row = self._rows[index]
        row.pid, row.in_flight, row.waiting = 0, 0, 0
        row.state = _STARTING

    def forked(self, index: int, pid: int) -> None:
        """Worker ``index`` runs as ``pid``."""
        self._rows[index].pid = pid

    def up(self, index: int, figures: _Figures) -> None:
        """Worker ``index`` (this process) serves from now on."""
        row = self._rows[index]
        row.pid = os.getpid()
        self.publish(index, figures)
        row.state = _UP

    def publish(self, index: int, figures: _Figures) -> None:
        """Write this worker's current figures into its row."""
        row = self._rows[index]
        row.in_flight, row.waiting = figures.in_flight, figures.waiting
        row.capacity, row.turned_away = figures.limit, figures.turned_away

    def down(self, index: int, status: int) -> None:
        """Worker ``index`` ended with wait status ``status``; its questions went with it."""
        row = self._rows[index]
        row.state = _DOWN
        row.exit_status = status
        row.in_flight, row.waiting = 0, 0

    def restarted(self, index: int) -> None:
        """Worker ``index`` is being started again after it ended."""
        self._rows[index].restarts += 1

    def drained(self, index: int, finished: int, cut: int) -> None:
        """Worker ``index`` (this process) drained: ``finished`` answers ran to their end, ``cut`` were cut."""
        row = self._rows[index]
        row.finished, row.cut = finished, cut

    def drain_totals(self) -> tuple[int, int]:
        """The answers finished and cut over every worker's drain."""
        return sum(row.finished for row in self._rows), sum(row.cut for row in self._rows)

    def report(self) -> tuple[list[WorkerHealth], HealthTotals]:
        """Every worker's figures, and their sums over the workers that are up."""
        workers = []
        for index, row in enumerate(self._rows):
            state = _STATES.get(row.state, "down")
            if state != "down" and row.pid and not _running(row.pid):
                state = "down"  # dead, and the first process has not yet noticed
            up = state == "up"
            workers.append(
                WorkerHealth(
                    index=index,
                    pid=row.pid,
                    state=state,  # type: ignore[arg-type]
                    in_flight=row.in_flight if up else 0,
                    waiting=row.waiting if up else 0,
                    capacity=row.capacity if up else 0,
                    turned_away=row.turned_away,
                    restarts=row.restarts,
                    last_exit=describe_exit(row.exit_status) if row.exit_status != _NEVER else None,
                )
            )
        totals = HealthTotals(
            workers=len(workers),
            workers_up=sum(w.state == "up" for w in workers),
            in_flight=sum(w.in_flight for w in workers),
            waiting=sum(w.waiting for w in workers),
            capacity=sum(w.capacity for w in workers),
            turned_away=sum(w.turned_away for w in workers),
            restarts=sum(w.restarts for w in workers),
        )
        return workers, totals


def describe_exit(status: int) -> str:
    """How a process ended, from its wait status: ``killed by SIGKILL``, ``exited with status 1``."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"ended (wait status {status})"


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc to ask: the signal test is all there is
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
