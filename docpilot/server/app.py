"""The assistant as an HTTP service: ``POST /v1/ask`` streams an answer, ``GET /healthz`` says it is up.

``create_app`` builds the Starlette app around a loaded workspace and model, both made
once per process; ``run_server`` serves it under uvicorn, and ``serve_in_thread`` does
the same in a background thread for tests and for an eval that starts its own server.
The wire format is in ``docpilot.api.schema``; the token check in
``docpilot.server.auth``; one question's journey in ``docpilot.server.turn``.

A request to ``/v1/ask`` passes, in order: on a loopback server, a local ``Host`` and
no foreign ``Origin`` (403); the bearer token (401); ``Content-Type: application/json``
(415); the body size (413); the body's shape, the question's length and a follow-up's
``history`` (422); and a slot, waiting in arrival order while the queue has room (503
with ``Retry-After`` past it; see ``docpilot.server.admission``). The slot is freed when the answer's last
byte is sent or the client goes away; a client that disconnects cancels the model's
work. Deadlines on the headers and on the whole request, header size and the
connection cap are enforced below the app, in ``docpilot.server.protocol``. No response carries a traceback: unexpected
failures are logged with the request's id and answered with a generic message that
quotes the id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from docpilot.api.schema import (
    MAX_BODY_BYTES,
    MAX_QUESTION_CHARS,
    AskRequest,
    AskResult,
    DoneEvent,
    ErrorBody,
    ErrorEvent,
    Health,
    ModelInfo,
    openapi_document,
)
from docpilot.assistant.workspace import Workspace
from docpilot.models.base import Model
from docpilot.server.admission import DEFAULT_MAX_CONCURRENCY, DEFAULT_QUEUE_DEPTH, Slots
from docpilot.server.answering import AnswerLoop
from docpilot.server.auth import BearerAuth
from docpilot.server.draining import Cut, Drain
from docpilot.server.guards import foreign_request, is_json
from docpilot.server.roster import Roster
from docpilot.server.searching import SearchPool
from docpilot.server.serving import bind, run_server, serve_in_thread, url_of
from docpilot.server.turn import Event, answer_events
from docpilot.telemetry.turns import turn_tracer

__all__ = ["bind", "create_app", "run_server", "serve_in_thread", "url_of"]

_log = logging.getLogger("docpilot.server")
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_INTERNAL = "the server failed to answer; the request id names the failure in the server's log"
_SHUTDOWN = "the server is stopping and its grace period for answers under way is over; ask again"
_CLOSE = {"Connection": "close"}  # while draining: the client's next request goes to another server


class _Problem(Exception):
    """A request the server refuses with a 4xx and a message for the client."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _error_response(
    status: int, code: str, message: str, request_id: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(error=ErrorEvent(code=code, message=message, request_id=request_id))
    headers = {"X-Request-Id": request_id, **(headers or {})}
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def _frame(name: str, payload: BaseModel) -> bytes:
    # model_dump_json escapes newlines, so one data line carries the whole payload.
    return f"event: {name}\ndata: {payload.model_dump_json()}\n\n".encode()


class _EventStream(StreamingResponse):
    """An SSE response that frees its slot and stops its producer however the stream ends."""

    def __init__(self, events: AsyncIterator[bytes], release: Callable[[], None], request_id: str) -> None:
        super().__init__(events, media_type="text/event-stream", headers={**_SSE_HEADERS, "X-Request-Id": request_id})
        self._events = events
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._release()

        async def sending(message: dict) -> None:
            await send(message)
            # The slot is free once the last byte is out: the response's task lives on until the
            # connection's next request arrives, and a keep-alive client would find its own slot taken.
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                release()

        try:
            await super().__call__(scope, receive, sending)
        finally:
            # A client that went away leaves the producer suspended; closing it ends the model's work now.
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self._events.aclose()  # type: ignore[attr-defined]
            release()


async def _sse(
    events: AsyncIterator[Event], request_id: str, answers: AnswerLoop, drain: Drain
) -> AsyncIterator[bytes]:
    """The events as SSE frames, every frame ready at the same moment sent in one write.

    The events are produced on the answer loop: while the model streams, each piece
    goes out when it arrives, and what a model produces without waiting (the extractive
    model's whole reply) leaves in one write instead of one system call per word.
    Should the server's drain cut the answer, the stream ends with a ``shutdown``
    error event and ``done``, never silently.
    """
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    here = asyncio.get_running_loop()

    def put(frame: bytes | None) -> None:
        here.call_soon_threadsafe(queue.put_nowait, frame)

    def cut() -> None:
        queue.put_nowait(_frame("error", ErrorEvent(code="shutdown", message=_SHUTDOWN, request_id=request_id)))
        queue.put_nowait(_frame("done", DoneEvent(request_id=request_id)))
        queue.put_nowait(None)

    async def produce() -> None:
        try:
            async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
                async for name, payload in stream:
                    put(_frame(name, payload))
        except Exception:
            _log.exception("request %s failed while streaming", request_id)
            put(_frame("error", ErrorEvent(code="internal", message=_INTERNAL, request_id=request_id)))
            put(_frame("done", DoneEvent(request_id=request_id)))
        finally:
            put(None)

    producer = asyncio.wrap_future(answers.submit(produce()))
    forget = drain.watch(cut)
    try:
        while True:
            frames = [await queue.get()]
            while not queue.empty():
                frames.append(queue.get_nowait())
            ended = None in frames
            if ended:
                forget()
                frames = frames[: frames.index(None)]  # a cut stream's end may come before the producer's
            chunk = b"".join(frames)  # type: ignore[arg-type]
            if chunk:
                yield chunk
            if ended:
                return
    finally:
        forget()
        # A client that went away stops the model here: its work runs in the producer.
        producer.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(producer, return_exceptions=True)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    too_large = _Problem(413, "body_too_large", f"the request body is over {limit} bytes; send a shorter question")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


def _parse(body: bytes, max_question_chars: int) -> AskRequest:
    try:
        data = json.loads(body)
    except ValueError:
        raise _Problem(422, "invalid_json", 'the body is not JSON; send {"question": "..."}') from None
    except RecursionError:
        raise _Problem(422, "invalid_json", 'the body nests too deeply; send {"question": "..."}') from None
    try:
        ask = AskRequest.model_validate(data)
    except RecursionError:
        raise _Problem(422, "invalid_request", 'the body nests too deeply; send {"question": "..."}') from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors(include_input=False)
        )
        expected = "(expected {question, scope?, language?, stream?, history?})"
        raise _Problem(422, "invalid_request", f"{problems} {expected}") from None
    if len(ask.question) > max_question_chars:
        raise _Problem(
            422,
            "question_too_long",
            f"the question is {len(ask.question)} characters; the limit is {max_question_chars}",
        )
    return ask


def _server_timing(timing: Any) -> str:
    return ", ".join(
        f"{name};dur={getattr(timing, name + '_ms'):.3f}" for name in ("embed", "retrieve", "model", "total")
    )


async def _collect(events: AsyncIterator[Event], request_id: str) -> AskResult:
    result = AskResult(request_id=request_id)
    answer: list[str] = []
    thoughts: list[str] = []
    async for name, payload in events:
        if name in ("token", "thought"):
            (answer if name == "token" else thoughts).append(payload.text)  # type: ignore[attr-defined]
        elif name in ("retrieval", "citations", "refusal", "error", "timing"):
            setattr(result, name, payload)
    result.answer = "".join(answer).strip()
    result.reasoning = "".join(thoughts) or None
    return result


def create_app(
    workspace: Workspace,
    model: Model,
    *,
    token: str | None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    queue_depth: int = DEFAULT_QUEUE_DEPTH,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_question_chars: int = MAX_QUESTION_CHARS,
    local: bool = True,
    allowed_hosts: frozenset[str] = frozenset(),
) -> Starlette:
    """The HTTP app over a loaded workspace and model; ``token`` None serves without auth.

    ``local``: the server listens on a loopback address, so requests must name it (or
    one of ``allowed_hosts``, lower case) in ``Host`` and come from no foreign
    ``Origin`` (see ``docpilot.server.guards``).
    The app owns the model from here on: it closes it (``aclose``) when the server stops.
    ``app.state.slots.in_flight`` counts the questions being answered; ``app.state.roster``
    holds every worker's figures (one worker, unless ``run_server`` forks more) and
    ``app.state.worker`` the number of the worker this process is; ``app.state.drain``
    says whether the process is draining (``docpilot.server.draining``).
    """
    service = _Service(
        workspace,
        model,
        token=token,
        slots=Slots(max_concurrency, queue_depth),
        max_body_bytes=max_body_bytes,
        max_question_chars=max_question_chars,
        local_hosts=allowed_hosts if local else None,
    )
    app = Starlette(
        routes=[
            Route("/v1/ask", service.ask, methods=["POST"]),
            Route("/healthz", service.healthz, methods=["GET"]),
            Route("/openapi.json", service.openapi_json, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
        lifespan=service.lifespan,
    )
    app.state.slots = service.slots
    app.state.drain = service.drain
    app.state.roster = Roster(1)
    app.state.worker = 0
    return app


class _Service:
    """What the endpoints of one serving process share: the workspace, the model, the slots and the threads."""

    def __init__(
        self,
        workspace: Workspace,
        model: Model,
        *,
        token: str | None,
        slots: Slots,
        max_body_bytes: int,
        max_question_chars: int,
        local_hosts: frozenset[str] | None,
    ) -> None:
        self.workspace, self.model = workspace, model
        self.auth = BearerAuth(token)
        self.slots = slots
        self.drain = Drain()
        self.answers = AnswerLoop()
        self.searches = SearchPool(workspace)
        self.max_body_bytes, self.max_question_chars = max_body_bytes, max_question_chars
        self.local_hosts = local_hosts  # None: a public server, which checks no Host
        self.tracer = turn_tracer(workspace.config.telemetry, workspace.config.model.name)  # None: not traced
        self.openapi = openapi_document(
            max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, max_concurrency=slots.limit
        )

    async def ask(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        taken = False
        try:
            denied = self._refusal(request, request_id)
            if denied is not None:
                return denied
            body = await _read_body(request, self.max_body_bytes)
            if self.drain.draining:
                # Refused once the body is read: closing on unread bytes would reset the
                # connection before the client could read why.
                stopping = "the server is stopping and takes no new questions; ask again, another server will answer"
                raise _Problem(503, "draining", stopping, {"Retry-After": "1", **_CLOSE})
            question = _parse(body, self.max_question_chars)
            if not await self.slots.take():
                busy = f"{self.slots.limit} questions are being answered and {self.slots.waiting} wait; retry in a second"
                raise _Problem(503, "busy", busy, {"Retry-After": "1"})
            taken = True
            if self.drain.cutting:
                self.drain.cut_late()  # it waited in line past the grace period
                raise Cut
            events = self._events(question, request, request_id, started)
            if question.stream:
                taken = False  # the stream gives the slot back when it ends
                return _EventStream(_sse(events, request_id, self.answers, self.drain), self._release, request_id)
            return await self._answer(events, request_id)
        except _Problem as problem:
            return _error_response(problem.status, problem.code, problem.message, request_id, problem.headers)
        except Cut:
            return _error_response(503, "shutdown", _SHUTDOWN, request_id, _CLOSE)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody is left to read it
        except Exception:
            _log.exception("request %s failed", request_id)
            return _error_response(500, "internal", _INTERNAL, request_id)
        finally:
            if taken:
                self._release()

    def _refusal(self, request: Request, request_id: str) -> Response | None:
        """Why the request is refused before its body is read: another site, no token, the wrong type."""
        if self.local_hosts is not None and (foreign := foreign_request(request, self.local_hosts)) is not None:
            raise _Problem(403, *foreign)
        denied = self.auth.denial(request, request_id)
        if denied is not None:
            return denied
        if not is_json(request.headers.get("content-type")):
            raise _Problem(415, "unsupported_media_type", "send the body as Content-Type: application/json")
        return None

    def _events(self, question: AskRequest, request: Request, request_id: str, started: float) -> AsyncIterator[Event]:
        events = answer_events(
            self.workspace, self.model, question, request_id=request_id, started=started, searches=self.searches
        )
        if self.tracer is not None:
            events = self.tracer.traced(
                events, request_id=request_id, started=started, parent=request.headers.get("traceparent")
            )
        return events

    async def _answer(self, events: AsyncIterator[Event], request_id: str) -> Response:
        """The whole answer as one JSON body (``stream: false``)."""
        result = await self.drain.unless_cut(self.answers.run(_collect(events, request_id)))
        status = 502 if result.error is not None else 200
        headers = {"X-Request-Id": request_id}
        if result.timing is not None:
            headers["Server-Timing"] = _server_timing(result.timing)
        if self.drain.draining:
            headers.update(_CLOSE)
        return JSONResponse(result.model_dump(mode="json"), status_code=status, headers=headers)

    def _release(self) -> None:
        self.slots.give_back()
        self.drain.answer_ended()

    async def healthz(self, request: Request) -> Response:
        if self.local_hosts is not None and (foreign := foreign_request(request, self.local_hosts)) is not None:
            return _error_response(403, *foreign, "-")
        roster: Roster = request.app.state.roster
        workers, total = roster.report()
        settings = self.workspace.config.model
        if self.drain.draining:
            status = "draining"
        else:
            status = "ok" if total.workers_up == total.workers else "degraded"
        health = Health(
            status=status,
            draining=self.drain.draining,
            corpus=self.workspace.corpus.fingerprint,
            pages=len(self.workspace.corpus.pages),
            model=ModelInfo(provider=settings.provider, name=settings.name),
            auth="bearer" if self.auth.enabled else "off",
            in_flight=self.slots.in_flight,
            max_concurrency=self.slots.configured,
            waiting=self.slots.waiting,
            turned_away=self.slots.turned_away,
            worker=request.app.state.worker,
            total=total,
            workers=workers,
        )
        # A load balancer reads 503 as "send no more here"; the process still finishes its answers.
        if self.drain.draining:
            return JSONResponse(health.model_dump(), status_code=503, headers=_CLOSE)
        return JSONResponse(health.model_dump())

    async def openapi_json(self, request: Request) -> Response:
        return JSONResponse(self.openapi)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # Streamed replies run in an anyio task group; opening one now loads anyio's asyncio
        # backend (tens of milliseconds) before the first question instead of during it.
        async with anyio.create_task_group():
            pass
        self.answers.start()  # here, not in create_app: a forked worker needs threads of its own
        self.searches.start(self.slots.limit)  # the worker's share of the slots is set by now
        if self.tracer is not None:
            self.tracer.start()  # here too: the exporter's sending thread must be this process's
        roster: Roster = app.state.roster
        worker: int = app.state.worker
        slots = self.slots
        slots.on_change = lambda: roster.publish(worker, slots)
        roster.up(worker, slots)
        try:
            yield
        finally:
            self.searches.stop()
            if self.tracer is not None:
                await asyncio.to_thread(self.tracer.stop)  # the spans still waiting, a few seconds at most
            close = getattr(self.model, "aclose", None)
            await self.answers.stop(close() if close is not None else None)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = "no such endpoint; see /openapi.json" if status == 404 else str(getattr(exc, "detail", "error"))
    headers = dict(getattr(exc, "headers", None) or {})  # a 405 names the methods allowed in Allow
    return _error_response(status, "not_found" if status == 404 else "http_error", message, "-", headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    _log.error("unhandled failure on %s", request.url.path, exc_info=exc)
    return _error_response(500, "internal", _INTERNAL, "-")
