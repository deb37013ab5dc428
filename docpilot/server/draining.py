"""A serving process that stops by draining: it finishes the answers under way, then exits.

A rolling deploy, ``systemctl restart`` or a Kubernetes eviction sends SIGTERM and
waits (30 s by default, as gunicorn's ``graceful_timeout``) before it kills. On the
first SIGTERM, or the first Ctrl-C, the process drains: it keeps its port open, so a
load balancer's health check still reaches it and reads ``/healthz`` answering 503
with ``"draining": true``, while a new question gets 503 ``draining`` with
``Retry-After`` and the connection closed, for the client to retry elsewhere. Every
answer under way (and every question already waiting for a slot) runs to its
``done`` event. When the last one ends the process stops; when the grace period ends
first, what is left is cut: a stream ends with an ``error`` event whose code is
``shutdown`` (then ``done``, as every stream does), a question asked with
``stream: false`` gets 503 ``shutdown``. A second signal stops at once.

uvicorn's own shutdown closes the port and every idle kept-alive connection first,
so no health check could see the drain; here it begins only once the drain is over.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import TypeVar

import uvicorn

T = TypeVar("T")

DEFAULT_GRACE_S = 30.0
"""How long answers under way may take to finish once the server is told to stop."""
CUT_GRACE_S = 1.0
"""How long the answers cut at the end of the grace period may take to send their last event."""


class Cut(Exception):
    """The answer was cut: the server is stopping and its grace period is over."""


class Drain:
    """One serving process's drain: whether it is draining, the answers it may cut, and what became of them.

    Used on the event loop that serves the connections only, so it needs no lock.
    """

    def __init__(self) -> None:
        self.draining = False
        """Whether the process has been told to stop: new questions are refused."""
        self.cutting = False
        """Whether the grace period is over: the answers still under way are being cut."""
        self.ended = 0
        """Answers that ended (finished or cut) since the drain began."""
        self.cut = 0
        """Answers cut at the end of the grace period."""
        self._cuts: set[Callable[[], None]] = set()

    @property
    def finished(self) -> int:
        """Answers that ran to their end during the drain."""
        return self.ended - self.cut

    def begin(self) -> None:
        """Refuse new questions from now on."""
        self.draining = True

    def answer_ended(self) -> None:
        """An answer gave its slot back."""
        if self.draining:
            self.ended += 1

    def watch(self, cut: Callable[[], None]) -> Callable[[], None]:
        """Call ``cut`` should the answer under way be cut; returns what to call when it ends first."""
        if self.cutting:
            cut()
        else:
            self._cuts.add(cut)
        return lambda: self._cuts.discard(cut)

    def cut_all(self) -> None:
        """Cut every answer still under way."""
        self.cutting = True
        cuts, self._cuts = self._cuts, set()
        for cut in cuts:
            self.cut += 1
            cut()

    def cut_late(self) -> None:
        """An answer that got its slot only once the others were being cut: it is cut too."""
        self.cut += 1  # its slot is given back like any other, which counts it as ended

    async def unless_cut(self, work: Awaitable[T]) -> T:
        """Await ``work``; raise Cut should the drain cut it meanwhile (which cancels it)."""
        task = asyncio.current_task()
        was_cut = False

        def cut() -> None:
            nonlocal was_cut
            was_cut = True
            if task is not None:
                task.cancel()

        forget = self.watch(cut)
        try:
            return await work
        except asyncio.CancelledError:
            # Cut, and cancelled for no other reason (a client gone away cancels it too).
            if was_cut and task is not None and task.uncancel() == 0:
                raise Cut from None
            raise
        finally:
            forget()


class DrainingServer(uvicorn.Server):
    """uvicorn's server, stopping by draining ``drain`` for at most ``grace_s``.

    ``signals``: those that start the drain. A worker under a supervisor drains on
    SIGTERM only, which the supervisor sends it: Ctrl-C reaches every process of the
    terminal's group, and the worker would take the supervisor's SIGTERM that follows
    for a second signal. ``announce``: this process logs the drain's two lines (the
    supervisor does, for its workers).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        drain: Drain,
        *,
        grace_s: float = DEFAULT_GRACE_S,
        idle: Callable[[], bool],
        under_way: Callable[[], int],
        signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT),
        announce: bool = True,
        report: Callable[[Drain], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.drain = drain
        self.grace_s = grace_s
        self._idle = idle
        self._under_way = under_way
        self._signals = signals
        self._announce = announce
        self._report = report
        self._told: int | None = None  # the signal that started the drain, not yet acted on
        self._deadline = 0.0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: it only sets flags (the loop may be anywhere); the next tick, within
        # 0.1 s, announces the drain and times the cut.
        if sig not in self._signals:
            return
        self._captured_signals.append(sig)
        if self.drain.draining or self.should_exit:
            self.should_exit = self.force_exit = True
            return
        self._deadline = time.monotonic() + self.grace_s
        self.drain.begin()
        self._told = sig

    async def on_tick(self, counter: int) -> bool:
        if self._told is not None:
            self._start(self._told)
        if self.drain.draining and not self.should_exit:
            self.should_exit = self._step()
        return await super().on_tick(counter)

    def _start(self, sig: int) -> None:
        self._told = None
        if self._announce:
            announce_start(self._under_way(), self.grace_s, sig)
        # On the dot, not at the next tick: the cut streams' last events go out meanwhile.
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + max(0.0, self._deadline - time.monotonic()), self._cut)

    def _cut(self) -> None:
        if not self._idle() and not self.drain.cutting:
            self.drain.cut_all()

    def _step(self) -> bool:
        """True when the process may stop: every answer ended, or the cut ones had their moment."""
        done = self._idle() or time.monotonic() >= self._deadline + CUT_GRACE_S
        if done:
            if self._report is not None:
                self._report(self.drain)
            if self._announce:
                announce_end(self.drain.finished, self.drain.cut)
        return done


def announce_start(under_way: int, grace_s: float, sig: int) -> None:
    """The line that says the server drains."""
    name = signal.Signals(sig).name
    answers = f"{under_way} answer{'' if under_way == 1 else 's'}"
    print(
        f"docpilot serve: {name}: draining, {answers} under way, at most {grace_s:g} s; new questions get 503",
        file=sys.stderr,
        flush=True,
    )


def announce_end(finished: int, cut: int) -> None:
    """The line that says the drain is over, and what became of the answers."""
    print(
        f"docpilot serve: drained: {finished} answer{'' if finished == 1 else 's'} finished, {cut} cut",
        file=sys.stderr,
        flush=True,
    )
