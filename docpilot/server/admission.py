"""Who is answered next: a fixed number of questions at once, the rest waiting in arrival order.

A question that finds every slot taken joins a first-in first-out queue instead of
being turned away, so under overload every client waits its turn and none waits the
whole time while later ones are served. Only when the queue itself is full does the
server answer 503 with ``Retry-After``: the queue's depth is the point past which
waiting would take longer than retrying.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from docpilot.errors import ConfigError

DEFAULT_MAX_CONCURRENCY = 32
"""Questions answered at once."""
DEFAULT_QUEUE_DEPTH = 256
"""Questions that may wait for a slot, in arrival order, before new ones get 503."""


class Slots:
    """The questions in flight and those waiting, on one event loop (so no lock)."""

    def __init__(self, limit: int, queue_depth: int = DEFAULT_QUEUE_DEPTH) -> None:
        if limit < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {limit}", hint="pass --max-concurrency 32")
        if queue_depth < 0:
            raise ConfigError(f"queue_depth must be 0 or more, got {queue_depth}", hint="pass --queue-depth 256")
        self.limit = limit
        self.configured = limit  # the server's whole limit; ``limit`` becomes one worker's share of it
        self.queue_depth = queue_depth
        self.in_flight = 0
        self.turned_away = 0
        """Questions refused with 503 since the server started: the line was full."""
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.on_change: Callable[[], None] | None = None
        """Called after every change of the figures (the server's roster copies them for ``/healthz``)."""

    @property
    def waiting(self) -> int:
        """Questions queued for a slot."""
        return len(self._waiting)

    async def take(self) -> bool:
        """Take a slot, waiting in line for one; False at once when the line is full."""
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1
            self._changed()
            return True
        if len(self._waiting) >= self.queue_depth:
            self.turned_away += 1
            self._changed()
            return False
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        self._changed()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give_back()  # the slot was handed over just as the waiter gave up
            else:
                self._waiting.remove(turn)
                self._changed()
            raise
        return True  # give_back handed its slot over: in_flight already counts this one

    def give_back(self) -> None:
        """Free a slot: the first waiter gets it, or it becomes free."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                self._changed()
                return
        self.in_flight -= 1
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
