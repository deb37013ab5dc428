"""The thread that answers questions, apart from the event loop that reads and writes the connections.

Retrieval, priming and the extractive model are CPU-bound Python: run on the event
loop that serves the sockets, each answer stops that loop for its whole length, so
``/healthz`` waits behind it and connections are read late and unevenly. Every turn
runs here instead, on an event loop of its own in one thread, and reaches the
connections' loop only through thread-safe calls. Turns start in the order they were
admitted (``call_soon_threadsafe`` keeps order), and a model that awaits a service
still interleaves its turns on this loop. A turn's search, blocking work that may wait
on an embedding service, leaves this loop for threads of its own
(``docpilot.server.searching``), so it holds up no other turn's stream.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class AnswerLoop:
    """One thread running an event loop for the turns; start it in the process that serves."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once per process: a forked worker starts its own)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="docpilot-answers", daemon=True)
        self._thread.start()
        ready.wait()
        self._loop = loop

    def submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``work`` on the answer loop; cancelling the future cancels the work there."""
        if self._loop is None:
            raise RuntimeError("the answer loop has not been started")
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` run on the answer loop, from the connections' loop."""
        future = self.submit(work)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    async def stop(self, closing: Coroutine[Any, Any, Any] | None = None, timeout_s: float = 5.0) -> None:
        """Run ``closing`` (such as the model's ``aclose``) on the answer loop, then end the thread."""
        loop, self._loop = self._loop, None
        if loop is None:
            if closing is not None:
                closing.close()
            return
        if closing is not None:
            future = asyncio.run_coroutine_threadsafe(closing, loop)
            try:
                await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
            except Exception:  # noqa: BLE001 - a model that fails to close must not stop the shutdown
                pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout_s)
        if not loop.is_running():
            loop.close()
