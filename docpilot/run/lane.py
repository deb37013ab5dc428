"""The model lane: one event loop that answers the model stage's records for a whole run.

Shards reach the model stage one after another, but a run's model calls should not
wait at shard boundaries: while the last few turns of one shard are in flight, the
next shard's turns fill the free slots. So every model stage of a run hands its
records to one lane, which keeps ``model.concurrency`` turns in flight across shards,
in the order the shards reach it, on one event loop in a thread of its own, over HTTP
connections that stay open from shard to shard.

A finished turn is stored in the cache at once, on a writer thread, so neither a
crash nor the next turn waits on the disk; the stage that sent a shard returns when
every one of its turns is answered and stored.

When several processes answer one run (the workers of a Dask cluster), each keeps
its share of ``model.concurrency`` in flight rather than the whole of it
(``concurrency_share``), so the endpoint sees the configured number across all of them.

Each run has its own lanes (``docpilot.run.context``, handed to the lane by the model step). A lane opens with the run's
first model stage that needs it and closes when the last one using it returns.
``RunContext.cancel`` stops the run's lanes (Ctrl-C, SIGTERM): turns in flight are
dropped, turns already answered are still stored.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from docpilot.assistant.language import preload as preload_language
from docpilot.models.base import Model, Turn
from docpilot.models.registry import build_model, provider_of
from docpilot.progress import Progress

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Trace, Workspace
    from docpilot.config.model import ModelConfig
    from docpilot.run.context import RunContext

# Turns in flight per model client: one client's 64 kept-alive connections serve up to
# 64 turns; more turns get another client rather than wait for a connection.
TURNS_PER_CLIENT = 64

# This process's part of model.concurrency, set around a model stage by the caller that
# knows how many processes share the bound; None: the whole of it.
_SHARE: ContextVar[int | None] = ContextVar("docpilot_concurrency_share", default=None)


class Interrupted(Exception):
    """The run stopped while this stage's turns were in flight."""


class _Batch:
    """One model stage's records: done when each of them is answered and stored, or when it failed."""

    def __init__(self, size: int, *, counted: bool = True) -> None:
        self.remaining = size
        self.counted = counted
        """Whether its turns advance the run's progress (not for turns sent ahead of the run's own stage)."""
        self.done: Future[None] = Future()
        self._lock = threading.Lock()  # the writer, the loop and an interrupt may settle it at once

    def finished_one(self) -> None:
        with self._lock:
            self.remaining -= 1
            if self.remaining == 0 and not self.done.done():
                self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if not self.done.done():
                self.done.set_exception(error)


class ModelLane:
    """At most ``concurrency`` model turns in flight for every shard sent to it, first come first served."""

    def __init__(self, ws: Workspace, finish: Callable[[Trace], None], *, turns: int | None = None,
                 progress: Progress | None = None, settings: ModelConfig | None = None) -> None:
        self._ws = ws
        self._settings = settings or ws.config.model
        self._progress = progress or Progress()
        self._finish = finish
        self.turns = turns or self._settings.concurrency
        """How many turns it keeps in flight: ``model.concurrency``, or this process's share of it."""
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="docpilot-model", daemon=True)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docpilot-store")
        self._batches: set[_Batch] = set()  # the batches being answered, for cancel()
        self._batches_lock = threading.Lock()
        self._workers: list[asyncio.Task] = []
        self._models: list[Model] = []
        # On the loop only: the askers of each prompt being answered, and the turns answered
        # so far, by the prompt's cache key. A prompt is sent once however often it is asked.
        self._waiting: dict[str, list[tuple[Trace, _Batch]]] = {}
        self._answered: dict[str, Turn] = {}
        self.users = 0
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._open(), self._loop).result()
        except BaseException:
            self.close()
            raise

    async def _open(self) -> None:  # on the lane's loop: the models' clients belong to it
        settings = self._settings
        # A model that answers in this process (the extractive one) is one object for every
        # turn, given the corpus's word weights counted once; an endpoint's client serves
        # TURNS_PER_CLIENT turns.
        in_process = provider_of(settings).endpoint == "none"
        idf = self._ws.idf if in_process else None
        count = 1 if in_process else -(-self.turns // TURNS_PER_CLIENT)
        self._models = [build_model(settings, corpus=self._ws.corpus, idf=idf) for _ in range(count)]
        self._queue: asyncio.Queue = asyncio.Queue()
        # Stored turns carry their languages once the language model is there; it loads
        # on a thread of its own meanwhile.
        preload_language()
        self._workers = [
            asyncio.create_task(self._work(self._models[w % count])) for w in range(self.turns)
        ]

    def answer(self, traces: list[Trace], keys: list[str], *, counted: bool = True) -> None:
        """Answer ``traces`` (each with a prompt), storing each turn as it arrives; blocks until all are stored.

        ``keys`` are the prompts' cache keys. A prompt already answered in this lane is
        not sent again, and one in flight is waited for: that is how the run's model
        stage picks up the turns of a shard sent ahead of it (``counted=False``, which
        leaves the progress to the stage).
        """
        if not traces:
            return
        batch = _Batch(len(traces), counted=counted)
        with self._batches_lock:
            self._batches.add(batch)
        try:
            self._loop.call_soon_threadsafe(self._enqueue, list(zip(traces, keys, strict=True)), batch)
            batch.done.result()
        finally:
            with self._batches_lock:
                self._batches.discard(batch)

    def _enqueue(self, asked: list[tuple[Trace, str]], batch: _Batch) -> None:
        for trace, key in asked:
            answered = self._answered.get(key)
            if answered is not None:
                self._settle(trace, batch, answered)
            elif key in self._waiting:
                self._waiting[key].append((trace, batch))
            else:
                self._waiting[key] = [(trace, batch)]
                self._queue.put_nowait(key)

    async def _work(self, model: Model) -> None:
        while True:
            key = await self._queue.get()
            askers = self._waiting[key]
            if all(batch.done.done() for _, batch in askers):  # failed or cancelled: skip the turn
                del self._waiting[key]
                continue
            try:
                turn = await model.complete(askers[0][0].prompt)
                ended = time.time()
            except Exception as error:  # a bug in a model; faults of the service end the turn instead
                for _, batch in self._waiting.pop(key):
                    batch.fail(error)
                continue
            if turn.error is None:  # a failed turn is asked again, as a re-run would
                self._answered[key] = turn
            for trace, batch in self._waiting.pop(key):
                self._settle(trace, batch, turn, ended)

    def _settle(self, trace: Trace, batch: _Batch, turn: Turn, ended: float | None = None) -> None:
        trace.turn = turn
        if ended is not None and turn.latency_ms is not None:
            # The turn's own measure, ending when it was received: its span lasts exactly latency_ms.
            trace.timeline["model"] = (ended - turn.latency_ms / 1000, ended)
        if batch.counted:
            self._progress.advance("model")
        # Not awaited: the next turn starts now, while this one is stored.
        self._writer.submit(self._store, trace, batch)

    def _store(self, trace: Trace, batch: _Batch) -> None:
        try:
            self._finish(trace)
        except BaseException as error:  # e.g. a full disk: the stage fails and says why
            batch.fail(error)
        else:
            batch.finished_one()

    def cancel(self) -> None:
        """Stop waiting for the turns in flight; what was already answered is still stored."""
        with self._batches_lock:
            batches = list(self._batches)
        for batch in batches:
            batch.fail(Interrupted("the run was interrupted; the turns answered so far are stored"))

    def close(self) -> None:
        """Stop the workers, close the models' connections and store every answered turn."""
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._shut(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        flush = getattr(self._finish, "close", None)
        flushed = self._writer.submit(flush) if flush is not None else None  # after every turn handed over
        self._writer.shutdown(wait=True)
        if flushed is not None:
            flushed.result()  # a failure to store (a full disk, say) is the stage's failure

    async def _shut(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        for model in self._models:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()


@contextmanager
def open_lane(run: RunContext, ws: Workspace, finish: Callable[[Trace], None], *,
              settings: ModelConfig | None = None) -> Iterator[ModelLane]:
    """The run's lane for the workspace, opened by its first user and closed when its last user leaves.

    ``finish(trace)`` runs on the writer thread after each turn: it stores the turn.
    When ``finish`` has a ``close`` method, the writer thread runs it once, as the lane
    closes. The lane keeps the ``finish`` (and the model ``settings``, by default the workspace's) of the
    user that opened it. A run that was
    interrupted opens no lane: its model stages stop at once.
    """
    with run.lock:
        if run.interrupt.is_set():
            raise Interrupted("the run was interrupted before this stage's turns were sent")
        lane = run.lanes.get(id(ws))
        if lane is None:
            lane = run.lanes[id(ws)] = ModelLane(ws, finish, turns=_SHARE.get(), progress=run.progress,
                                                 settings=settings)
        lane.users += 1
    try:
        yield lane
    finally:
        with run.lock:
            lane.users -= 1
            last = lane.users == 0
            if last:
                del run.lanes[id(ws)]
        if last:
            lane.close()


@contextmanager
def concurrency_share(turns: int) -> Iterator[None]:
    """Within the block, a lane this thread opens keeps ``turns`` in flight instead of ``model.concurrency``.

    For a process that answers part of a run beside others (a Dask worker): the caller
    splits ``model.concurrency`` so that the shares add up to it. A lane already open
    keeps the number it opened with.
    """
    if turns < 1:
        raise ValueError(f"a share of the model's concurrency is at least 1 turn, not {turns}")
    token = _SHARE.set(turns)
    try:
        yield
    finally:
        _SHARE.reset(token)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # not on every platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
