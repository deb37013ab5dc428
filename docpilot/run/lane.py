"""The model lane: the model turns of a whole run, on the run's event loop and within its limit.

Shards reach the model stage one after another, but a run's model calls should not
wait at shard boundaries: while the last few turns of one shard are in flight, the
next shard's turns take the free slots. So every model stage of a run hands its
records to the run's one lane, which sends each turn on the run's loop as soon as it
holds a slot of the run's limiter (``run.limiter``), in the order the shards reach it,
over HTTP connections that stay open for the whole run.

A finished turn is stored in the cache at once, on a writer thread, so neither a
crash nor the next turn waits on the disk; the stage that sent a shard returns when
every one of its turns is answered and stored. ``cancel`` stops the lane (Ctrl-C,
SIGTERM): turns in flight are dropped, turns already answered are still stored.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from docpilot.assistant.language import preload as preload_language
from docpilot.models.base import Model, Turn
from docpilot.models.registry import build_model, provider_of
from docpilot.progress import Progress
from docpilot.run.limiter import Interrupted, Limiter

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Trace, Workspace
    from docpilot.config.model import ModelConfig

__all__ = ["TURNS_PER_CLIENT", "Interrupted", "ModelLane"]

# Turns in flight per model client: one client's 64 kept-alive connections serve up to
# 64 turns; more turns get another client rather than wait for a connection.
TURNS_PER_CLIENT = 64


class _Batch:
    """One model stage's records: done when each of them is answered and stored, or when it failed."""

    def __init__(self, size: int, *, counted: bool = True) -> None:
        self.remaining = size
        self.counted = counted
        """Whether its turns advance the run's progress (not a follow-up's rewrite)."""
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
    """Every model turn of a run, at most ``limiter.turns`` in flight, first come first served."""

    def __init__(self, ws: Workspace, finish: Callable[[Trace], None], limiter: Limiter, *,
                 progress: Progress | None = None, settings: ModelConfig | None = None,
                 check: Callable[[Turn], BaseException | None] | None = None) -> None:
        self._ws = ws
        self._settings = settings or ws.config.model
        self._progress = progress or Progress()
        self._finish = finish
        self._limiter = limiter
        self._check = check
        """Reads the run's first reply strictly: the fault it returns stops the run (``models.probe.fault_of``)."""
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docpilot-store")
        self._batches: set[_Batch] = set()  # the batches being answered, for cancel()
        self._batches_lock = threading.Lock()
        self._models: list[Model] = []
        self._sent = 0
        self._failed: BaseException | None = None
        # On the loop only: the askers of each prompt being answered, and the turns answered
        # so far, by the prompt's cache key. A prompt is sent once however often it is asked.
        self._waiting: dict[str, list[tuple[Trace, _Batch]]] = {}
        self._answered: dict[str, Turn] = {}
        self._judged = False
        self._asking: set[asyncio.Task] = set()  # on the loop only: the turns being asked, for close()
        limiter.run(self._open())

    async def _open(self) -> None:  # on the run's loop: the models' clients belong to it
        settings = self._settings
        # A model that answers in this process (the extractive one) is one object for every
        # turn, given the corpus's word weights counted once; an endpoint's client serves
        # TURNS_PER_CLIENT turns.
        in_process = provider_of(settings).endpoint == "none"
        idf = self._ws.idf if in_process else None
        count = 1 if in_process else -(-self._limiter.turns // TURNS_PER_CLIENT)
        self._models = [build_model(settings, corpus=self._ws.corpus, idf=idf) for _ in range(count)]
        # Stored turns carry their languages once the language model is there; it loads
        # on a thread of its own meanwhile.
        preload_language()

    def answer(self, traces: list[Trace], keys: list[str], *, counted: bool = True) -> None:
        """Answer ``traces`` (each with a prompt), storing each turn as it arrives; blocks until all are stored.

        ``keys`` are the prompts' cache keys. A prompt already answered in this lane is
        not sent again, and one in flight is waited for.
        """
        if not traces:
            return
        if self._failed is not None:
            raise self._failed
        batch = _Batch(len(traces), counted=counted)
        with self._batches_lock:
            self._batches.add(batch)
        try:
            self._limiter.loop.call_soon_threadsafe(self._enqueue, list(zip(traces, keys, strict=True)), batch)
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
                task = asyncio.get_running_loop().create_task(self._ask(key, self._models[self._sent % len(self._models)]))
                self._asking.add(task)
                task.add_done_callback(self._asking.discard)
                self._sent += 1

    async def _ask(self, key: str, model: Model) -> None:
        async with self._limiter.slot:
            askers = self._waiting[key]
            if all(batch.done.done() for _, batch in askers):  # failed or cancelled: skip the turn
                del self._waiting[key]
                return
            try:
                turn = await model.complete(askers[0][0].prompt)
                ended = time.time()
                self._judge_first(turn)
            except Exception as error:  # a bug in a model, or the first reply's fault; the service's end the turn
                self._failed = self._failed or error
                for _, batch in self._waiting.pop(key):
                    batch.fail(error)
                return
        if turn.error is None:  # a failed turn is asked again, as a re-run would
            self._answered[key] = turn
        for trace, batch in self._waiting.pop(key):
            self._settle(trace, batch, turn, ended)

    def _judge_first(self, turn: Turn) -> None:
        """The run's first reply (the first to come back; every turn still goes out at once) is read strictly:
        a fault that says the endpoint cannot serve the run at all stops it there."""
        if self._failed is not None:
            raise self._failed
        if self._judged:
            return
        self._judged = True
        fault = self._check(turn) if self._check is not None else None
        if fault is not None:
            raise fault

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
        """Close the models' connections and store every answered turn."""
        try:
            self._limiter.run(self._shut())
        except Interrupted:
            pass  # the run's loop is stopping: its connections go with it
        flush = getattr(self._finish, "close", None)
        flushed = self._writer.submit(flush) if flush is not None else None  # after every turn handed over
        self._writer.shutdown(wait=True)
        if flushed is not None:
            flushed.result()  # a failure to store (a full disk, say) is the stage's failure

    async def _shut(self) -> None:
        for task in list(self._asking):  # a run that stops drops its turns in flight; the answered are stored
            task.cancel()
        await asyncio.gather(*self._asking, return_exceptions=True)
        for model in self._models:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
