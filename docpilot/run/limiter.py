"""A run's one event loop and its one bound on questions in flight.

Every question a run sends goes through its ``Limiter``, whoever answers it: a turn
to a model endpoint, a question to a DocPilot server, a question to a target. The
limiter owns an event loop on a thread of its own, opened with the run's first
question and closed with the run, so HTTP connections stay open from shard to shard,
and a semaphore of ``turns`` slots on that loop that every asker holds while its
question is out. The shards travel on threads of their own and hand their questions
to the loop (``run``), so ``turns`` is the bound across all of them.

Where several processes or several runs share one endpoint (the workers of a Dask
cluster, the variants of a run that call one service) each gets a share of the bound
from ``split`` (``docpilot.net.shares``), so the endpoint sees the configured number
across them all.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from docpilot.net.shares import split

__all__ = ["Interrupted", "Limiter", "split"]

T = TypeVar("T")


class Interrupted(Exception):
    """The run stopped while questions were in flight; what was answered is stored."""


class Limiter:
    """At most ``turns`` questions in flight, on one event loop that lives as long as the run."""

    def __init__(self, turns: int) -> None:
        if turns < 1:
            raise ValueError(f"a run keeps at least 1 question in flight, not {turns}")
        self.turns = turns
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._slots: asyncio.Semaphore | None = None
        self._pending: set[Future] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The run's event loop, started on first use."""
        with self._lock:
            if self._closed:
                raise Interrupted("the run was interrupted; the turns answered so far are stored")
            if self._loop is None:
                self._loop = _new_loop()
                self._slots = asyncio.Semaphore(self.turns)
                self._thread = threading.Thread(target=self._loop.run_forever, name="docpilot-run", daemon=True)
                self._thread.start()
            return self._loop

    @property
    def slot(self) -> asyncio.Semaphore:
        """The slots a question holds while it is out (use on the run's loop: ``async with limiter.slot``)."""
        if self._slots is None:  # read once per question: no lock once the loop is up
            self.loop  # noqa: B018  (starts the loop and its slots)
        return self._slots

    def submit(self, work: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``work`` on the run's loop; its future, cancelled by ``cancel``."""
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the run's loop and wait for its result (Interrupted when the run stops meanwhile)."""
        future = self.submit(work)
        try:
            return future.result()
        except asyncio.CancelledError:
            raise Interrupted("the run was interrupted; the turns answered so far are stored") from None

    def cancel(self) -> None:
        """Stop what is in flight (the run is stopping; what comes after is the caller's to refuse)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    def close(self) -> None:
        """Stop the loop and its thread (what still runs on it is cancelled)."""
        with self._lock:
            loop, thread, self._closed = self._loop, self._thread, True
        if loop is None or loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._pending.discard(future)


async def _cancel_all() -> None:
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # not on every platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
