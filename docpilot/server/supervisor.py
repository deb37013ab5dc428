"""The first process of a server with several workers: it forks them, starts again any that ends, and stops them all.

It answers no question itself and starts no thread, so every fork, the first ones and
each restart, copies a process that holds the loaded docs and model and nothing half
done. A worker that ends while the server runs (a crash, the kernel's out-of-memory
killer, a stray ``kill -9``) is reported in one line on stderr, naming the worker and
how it ended, and forked again on the same listening socket: the first process keeps
every socket open, so connections the kernel hands to the dead worker's socket wait
in its backlog for the new one instead of being refused. A worker that ends within
``QUICK_DEATH_S`` of its start waits ``RESTART_PAUSE_S`` before the next attempt, so
a worker that cannot start does not spin.

SIGTERM or Ctrl-C stops the server: the workers are sent SIGTERM and drain (they
finish the answers under way, for at most the grace period, then cut what is left;
``docpilot.server.draining``), and are awaited; the first process logs the drain's
start and, once the last worker ended, how many answers finished and how many were
cut. A worker that ends first has its socket closed here too, so the kernel hands new
connections to the workers still listening rather than to a backlog nobody reads. One
still running ``STOP_MARGIN_S`` after the grace period, or when the signal comes a
second time, is killed. The workers die with the first process should it be killed
outright (Linux's parent-death signal).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from docpilot.processes import die_with_parent
from docpilot.server.draining import DEFAULT_GRACE_S, announce_end, announce_start
from docpilot.server.roster import Roster, describe_exit

QUICK_DEATH_S = 5.0
"""A worker that ends sooner than this after its start is started again only after a pause."""
RESTART_PAUSE_S = 1.0
"""The pause before restarting a worker that ended quickly."""
STOP_MARGIN_S = 5.0
"""How long past the grace period stopping workers may take (cutting, closing) before they are killed."""
_POLL_S = 0.5


@dataclass
class _Worker:
    index: int
    pid: int
    started: float
    pidfd: int | None


def supervise(
    serve: Callable[[int], None],
    workers: int,
    roster: Roster,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    closed: Callable[[int], None] = lambda index: None,
) -> None:
    """Run ``serve(index)`` in one forked process per worker, restarting each that ends, until SIGTERM or Ctrl-C.

    ``grace_s``: how long the workers drain once told to stop. ``closed(index)`` is
    called when worker ``index`` ended while the server stops (to close its socket).
    """
    _Supervisor(serve, roster, grace_s, closed).run(workers)


class _Supervisor:
    """The first process's state: the workers running, those due to start again, and whether it stops."""

    def __init__(
        self, serve: Callable[[int], None], roster: Roster, grace_s: float, closed: Callable[[int], None]
    ) -> None:
        self.serve, self.roster, self.grace_s, self.closed = serve, roster, grace_s, closed
        self.parent = os.getpid()
        self.running: dict[int, _Worker] = {}
        self.due: dict[int, float] = {}  # workers to start again, by the time they may
        self.stop_at: float | None = None
        self.told: list[int] = []  # the signal that began the drain, for the loop to log (no printing in a handler)

    def run(self, workers: int) -> None:
        previous = {signum: signal.signal(signum, self.stop) for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(workers):
                self.start(index)
            while self.running or self.due:
                _wait(self.running, self.due)
                self.tick(time.monotonic())
            if self.stop_at is not None:
                announce_end(*self.roster.drain_totals())
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self.running:  # an error of the supervisor itself: take the workers down with it
                _signal(self.running, signal.SIGTERM)
                for pid in list(self.running):
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, 0)

    def start(self, index: int) -> None:
        self.roster.starting(index)
        sys.stdout.flush()  # or the worker would write the same buffered lines again
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_worker(self.serve, index, self.parent, [w.pidfd for w in self.running.values()])
        self.roster.forked(index, pid)
        self.running[pid] = _Worker(index, pid, time.monotonic(), _pidfd(pid))

    def stop(self, signum: int, frame: object) -> None:
        """The handler of SIGTERM and SIGINT: the first drains the workers, a second kills them."""
        again = self.stop_at is not None
        if not again:
            self.stop_at = time.monotonic() + self.grace_s + STOP_MARGIN_S
            self.told.append(signum)
        self.due.clear()
        _signal(self.running, signal.SIGKILL if again else signal.SIGTERM)

    def tick(self, now: float) -> None:
        """Log a drain just begun, reap the workers that ended, and start again those due."""
        if self.told:
            _, total = self.roster.report()
            announce_start(total.in_flight + total.waiting, self.grace_s, self.told.pop())
        for worker in _ended(self.running, self.roster):
            if self.stop_at is not None:
                self.closed(worker.index)
            else:
                self.restart_later(worker, now)
        if self.stop_at is None:
            for index, when in list(self.due.items()):
                if when <= now:
                    del self.due[index]
                    self.roster.restarted(index)
                    self.start(index)
        elif now > self.stop_at:
            _signal(self.running, signal.SIGKILL)

    def restart_later(self, worker: _Ended, now: float) -> None:
        how = describe_exit(worker.status)
        quick = now - worker.started < QUICK_DEATH_S
        pause = f" in {RESTART_PAUSE_S:g} s" if quick else ""
        print(
            f"docpilot serve: worker {worker.index} (pid {worker.pid}) {how}; starting it again{pause}",
            file=sys.stderr,
            flush=True,
        )
        self.due[worker.index] = now + (RESTART_PAUSE_S if quick else 0.0)


@dataclass
class _Ended:
    index: int
    pid: int
    started: float
    status: int


def _ended(running: dict[int, _Worker], roster: Roster) -> list[_Ended]:
    """Reap the workers that ended, mark them down, and say which they were."""
    ended = []
    for pid, worker in list(running.items()):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done == 0:
            continue
        del running[pid]
        if worker.pidfd is not None:
            os.close(worker.pidfd)
        roster.down(worker.index, status)
        ended.append(_Ended(worker.index, pid, worker.started, status))
    return ended


def _wait(running: dict[int, _Worker], due: dict[int, float]) -> None:
    """Sleep until a worker ends, a restart is due, or ``_POLL_S`` has passed."""
    timeout = _POLL_S
    if due:
        timeout = max(0.0, min(timeout, min(due.values()) - time.monotonic()))
    fds = [w.pidfd for w in running.values() if w.pidfd is not None]
    # A signal handler that runs meanwhile returns here and the wait goes on (PEP 475);
    # the workers it signalled end, and their descriptors wake it.
    if fds and len(fds) == len(running):
        select.select(fds, [], [], timeout)
    else:
        time.sleep(min(timeout, 0.1))  # no descriptors to wait on: poll


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` ends (Linux 5.3 and later); None elsewhere."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _signal(running: dict[int, _Worker], signum: int) -> None:
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _become_worker(serve: Callable[[int], None], index: int, parent: int, inherited: list[int | None]) -> None:
    """The forked process: serve as worker ``index`` and exit, never returning into the supervisor."""
    code = 1
    try:
        for fd in inherited:
            if fd is not None:
                os.close(fd)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)  # the server installs its own; the supervisor's are not for it
        die_with_parent(parent)  # Linux ends a worker when the supervisor dies, even by kill -9
        serve(index)
        code = 0
    except BaseException:  # noqa: BLE001 - whatever it was, the supervisor hears of it by the exit status
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
