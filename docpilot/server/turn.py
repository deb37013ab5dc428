"""One question on the server: retrieve, prime, gate, model and render, told as a series of events.

It takes the steps of ``docpilot.assistant.turn`` that the eval's stages take
(``search_query``: what a follow-up is searched with; ``primed``: the prompt and the
retrieval gate; ``panel``: the rendered answer), after the same search
(``Retriever.search`` with the configured ``top_k``), so a question answered here gets
the panel the eval would score. A request's ``history`` (a follow-up's earlier
messages) reaches both the search and the prompt; the ``retrieval`` event's ``query``
says what was searched when it was not the question.

Models stream through an optional ``stream(prompt)`` async iterator. Each piece is a
``str`` of answer text, or a ``(kind, text)`` pair whose kind is ``"token"`` (answer),
``"thought"`` (reasoning) or ``"finish"`` (how the turn ended and its usage, as the
`done` event then tells the client); a fault raises ``ModelError``. A model without
``stream`` is called through ``complete`` and its turn is sent whole.

The answer's first characters are held back until it is clear whether they open a
``REFUSE:`` line, so a reader never sees the refusal protocol painted as an answer;
this costs at most the first seven characters.

A reply is capped as it streams, whatever model gives it: past
``reply_char_limit(model.max_tokens)`` characters of answer and reasoning together the
model's stream is closed and the client gets a ``reply_too_long`` error event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel

from docpilot.api.schema import (
    AskRequest,
    DoneEvent,
    ErrorEvent,
    PrimedSource,
    RankedHit,
    RefusalEvent,
    RetrievalEvent,
    TextEvent,
    TimingEvent,
)
from docpilot.assistant.primer import earlier_turns
from docpilot.assistant.turn import panel, primed, search_query, url_for
from docpilot.assistant.workspace import Workspace
from docpilot.errors import ModelError
from docpilot.models.base import INTERRUPTED_HINT, Model, Prompt, finish_piece, parse_refusal, read_finish
from docpilot.models.wire import reply_char_limit, reply_too_long
from docpilot.schema import Cause
from docpilot.server.searching import SearchPool

T = TypeVar("T")

Event = tuple[str, BaseModel]
"""An event's name and its payload."""

_log = logging.getLogger("docpilot.server")
_PROTOCOL = "REFUSE:"


async def answer_events(
    ws: Workspace, model: Model, ask: AskRequest, *, request_id: str, started: float,
    searches: SearchPool | None = None,
) -> AsyncIterator[Event]:
    """The events of one question, from ``retrieval`` to ``done``; ``started`` is its arrival (perf_counter).

    The search runs on ``searches``' threads, so the other streams of this loop keep
    flowing meanwhile (without a pool it runs here). A model fault or timeout becomes
    an ``error`` event; any other exception is a bug and propagates, for the caller to
    log and hide.
    """
    clock = time.perf_counter
    history = [message.model_dump() for message in ask.history]
    query = search_query(ask.question, earlier_turns(history))
    found = await (searches or SearchPool(ws)).search(ask, query)
    hits, embed_ms, retrieve_ms = found.hits, found.embed_ms, found.retrieve_ms
    step = primed(ws, ask.question, hits, history=history)
    prompt, link = step.prompt, url_for(ws)
    yield "retrieval", RetrievalEvent(
        hits=[RankedHit(section_id=h.section_id, chunk_id=h.chunk_id, score=h.score) for h in hits],
        primed=[
            PrimedSource(n=s.n, section_id=s.section_id, title=s.title, url=link(s.section_id))
            for s in prompt.sources
        ],
        query=query if query != ask.question else None,
    )
    model_ms = 0.0
    done = DoneEvent(request_id=request_id)
    if step.gate_refused:
        yield "refusal", RefusalEvent(refused_by="gate", cause="not-answerable")
    else:
        reply = _Reply(max_tokens=ws.config.model.max_tokens)
        failure: ErrorEvent | None = None
        mark = clock()
        try:
            async with contextlib.aclosing(_model_events(model, prompt, reply, ws.config.model.timeout_s)) as events:
                async for event in events:
                    yield event
        except TimeoutError:
            limit = ws.config.model.timeout_s
            _log.warning("request %s: the model gave no complete reply within %g s", request_id, limit)
            failure = ErrorEvent(
                code="model_timeout", message=f"the model did not finish within {limit:g} s", request_id=request_id
            )
        except ModelError as exc:
            _log.warning("request %s: the model failed: %s", request_id, exc)
            failure = _model_failure(exc, request_id)
        model_ms = (clock() - mark) * 1000
        done = DoneEvent(request_id=request_id, finish_reason=reply.finish_reason,
                         truncated=failure is None and reply.finish_reason == "length", usage=reply.usage)
        for event in reply.finish(keep_back=failure is not None):
            yield event
        if failure is not None:
            yield "error", failure
        elif reply.cause is not None:
            yield "refusal", RefusalEvent(refused_by="model", cause=reply.cause, reply=reply.answer)
        else:
            yield "citations", panel(ws, reply.answer, prompt.sources)
    yield "timing", TimingEvent(
        embed_ms=round(embed_ms, 3),
        retrieve_ms=round(retrieve_ms, 3),
        model_ms=round(model_ms, 3),
        total_ms=round((clock() - started) * 1000, 3),
    )
    yield "done", done


def _model_failure(failure: ModelError, request_id: str) -> ErrorEvent:
    """The error event of a failed model turn: the cause a client can act on, no internals.

    A turn the model service never finished (no finish_reason) is named apart, with the
    fix, so the client's error rows say why rather than "retry later". The turn's error
    code decides, never the wording of its message.
    """
    if failure.code == "unfinished":
        return ErrorEvent(
            code="model_unfinished",
            message=f"the model service ended the turn without finishing it (no finish_reason); fix: {INTERRUPTED_HINT}",
            request_id=request_id,
        )
    if failure.code == "empty":
        return ErrorEvent(code="model_empty", message="the model finished without answer text or a refusal",
                          request_id=request_id)
    if failure.code == "reply_too_long":
        return ErrorEvent(
            code="reply_too_long",
            message="the model's reply ran past max_tokens and was cut; fix: check that the model service "
            "honours max_tokens, or raise model.max_tokens in the server's config",
            request_id=request_id,
        )
    return ErrorEvent(code="model_error", message="the model failed to answer; retry later", request_id=request_id)


async def _model_events(model: Model, prompt: Prompt, reply: _Reply, timeout_s: float) -> AsyncIterator[Event]:
    """The model's pieces as events, the whole stage bounded by ``timeout_s``."""
    deadline = _Deadline(timeout_s)
    try:
        async with contextlib.aclosing(_pieces(model, prompt)) as pieces:
            while True:
                try:
                    kind, text = await deadline.wait(anext(pieces))
                except StopAsyncIteration:
                    return
                for event in reply.take(kind, text):
                    yield event
    finally:
        deadline.close()


class _Deadline:
    """One timer for a whole stage that cancels a wait of it, never the consumer's work between waits.

    A timeout that fired while the consumer held the generator would cancel the
    consumer's work instead, so the deadline guards each wait alone. ``asyncio.timeout``
    around each wait would arm and cancel a timer per piece (one per word of an extractive
    answer), leaving a heap of cancelled timers; this arms one for the stage.
    """

    def __init__(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._handle = loop.call_at(loop.time() + timeout_s, self._expire)
        self._expired = False
        self._waiting: asyncio.Task | None = None  # the task in a wait now
        self._cancelled: asyncio.Task | None = None  # the task this deadline cancelled

    def _expire(self) -> None:
        self._expired = True
        if self._waiting is not None:
            self._cancelled = self._waiting
            self._waiting.cancel()

    async def wait(self, step: Awaitable[T]) -> T:
        """Await ``step``; TimeoutError once the deadline is past, before it or during it."""
        if self._expired:
            close = getattr(step, "close", None)
            if close is not None:
                close()  # never awaited: closed, so it warns of nothing
            raise TimeoutError
        task = asyncio.current_task()
        self._waiting = task
        try:
            return await step
        except asyncio.CancelledError:
            if self._cancelled is task and task is not None and task.uncancel() == 0:
                raise TimeoutError from None
            raise
        finally:
            self._waiting = None

    def close(self) -> None:
        self._handle.cancel()


async def _pieces(model: Model, prompt: Prompt) -> AsyncIterator[tuple[str, str]]:
    """The model's reply as ``(kind, text)`` pieces, through ``stream`` when it has one."""
    stream: Callable[[Prompt], AsyncIterator[object]] | None = getattr(model, "stream", None)
    if stream is None:
        turn = await model.complete(prompt)
        if turn.error is not None:
            raise ModelError(turn.error, code=turn.error_code)
        if turn.reasoning:
            yield "thought", turn.reasoning
        yield "token", turn.answer
        yield "finish", finish_piece(turn)
        return
    async with contextlib.aclosing(stream(prompt)) as pieces:  # type: ignore[type-var]
        async for piece in pieces:
            if isinstance(piece, str):
                yield "token", piece
            elif isinstance(piece, tuple) and len(piece) == 2 and piece[0] in ("token", "thought", "finish"):
                yield piece[0], str(piece[1])
            else:
                raise TypeError(f"a model's stream gave {type(piece).__name__}; expected str or (kind, text)")


class _Reply:
    """The model's reply so far, deciding as early as it can whether it is a refusal."""

    def __init__(self, *, max_tokens: int | None = None) -> None:
        self.max_tokens = max_tokens
        # Characters of answer and reasoning together the reply may hold; None: no cap.
        self.char_limit = reply_char_limit(max_tokens) if max_tokens is not None else None
        self.chars = 0
        self.parts: list[str] = []
        self.thoughts: list[str] = []
        self.held = ""
        self.decided: bool | None = None  # None: not yet known; True: refusal; False: answer
        self.cause: Cause | None = None
        self.finish_reason: str | None = None  # as the model service said, when it said
        self.usage: dict[str, int] = {}

    @property
    def reasoning(self) -> str | None:
        """The reasoning text, None when the model streamed none."""
        return "".join(self.thoughts) or None

    @property
    def answer(self) -> str:
        """The full reply text, as ``complete`` would return it."""
        return "".join(self.parts).strip()

    def take(self, kind: str, text: str) -> list[Event]:
        """Add one piece; the events to send now."""
        if kind == "finish":
            self.finish_reason, self.usage = read_finish(text)
            return []
        if not text:
            return []
        if self.char_limit is not None:
            # Checked before the piece is kept, so that one huge piece is refused whole.
            if self.chars + len(text) > self.char_limit:
                fault = reply_too_long(self.max_tokens or 0, f"more than {self.char_limit} characters of answer "
                                       "and reasoning")
                raise ModelError(fault.message, code=fault.code)
            self.chars += len(text)
        if kind == "thought":
            self.thoughts.append(text)
            return [("thought", TextEvent(text=text))]
        self.parts.append(text)
        if self.decided is False:
            return [("token", TextEvent(text=text))]
        self.held += text
        if self.decided is None:
            self.decided = _opens_refusal(self.held)
        return self._release() if self.decided is False else []

    def finish(self, *, keep_back: bool = False) -> list[Event]:
        """Decide what the whole reply was; the held-back answer text still to send.

        ``keep_back`` (the turn failed) sends nothing more: a partial refusal line is no answer.
        """
        self.cause = parse_refusal(self.answer)
        if keep_back or self.cause is not None:
            return []
        return self._release()

    def _release(self) -> list[Event]:
        held, self.held = self.held, ""
        self.decided = False
        return [("token", TextEvent(text=held))] if held else []


def _opens_refusal(text: str) -> bool | None:
    """Whether text opens with ``REFUSE:``; None while it is still too short to tell."""
    start = text.lstrip()
    if len(start) >= len(_PROTOCOL):
        return start[: len(_PROTOCOL)].upper() == _PROTOCOL
    return None if _PROTOCOL.startswith(start.upper()) else False
