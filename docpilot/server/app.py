"""The assistant as an HTTP service: ``POST /v1/ask`` streams an answer, ``GET /healthz`` says it is up.

``create_app`` builds the Starlette app around a loaded workspace and model, both made
once per process; ``run_server`` serves it under uvicorn, and ``serve_in_thread`` does
the same in a background thread for tests and for an eval that starts its own server.
The wire format is in ``docpilot.server.schema``; the token check in
``docpilot.server.auth``; one question's journey in ``docpilot.server.turn``.

A request to ``/v1/ask`` passes, in order: the bearer token (401), the body size
(413), the body's shape and the question's length (422), and a free slot (503 with
``Retry-After``; taking a slot never waits). The slot is held until the answer's last
byte is sent or the client goes away; a client that disconnects cancels the model's
work. No response carries a traceback: unexpected failures are logged with the
request's id and answered with a generic message that quotes the id.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from docpilot.errors import ConfigError
from docpilot.models.base import Model
from docpilot.run.workspace import Workspace
from docpilot.server.auth import BearerAuth
from docpilot.server.schema import (
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
from docpilot.server.turn import Event, answer_events

DEFAULT_MAX_CONCURRENCY = 32
"""Questions answered at once before new ones are turned away with 503."""

_log = logging.getLogger("docpilot.server")
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_INTERNAL = "the server failed to answer; the request id names the failure in the server's log"


class Slots:
    """A non-blocking count of the questions in flight: a full server says so at once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {limit}", hint="pass --max-concurrency 32")
        self.limit = limit
        self.in_flight = 0

    def try_take(self) -> bool:
        """Take a slot if one is free; never waits (all callers share one event loop, so no lock)."""
        if self.in_flight >= self.limit:
            return False
        self.in_flight += 1
        return True

    def give_back(self) -> None:
        """Free a slot taken with ``try_take``."""
        self.in_flight -= 1


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
        try:
            await super().__call__(scope, receive, send)
        finally:
            # A client that went away leaves the producer suspended; closing it ends the model's work now.
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self._events.aclose()  # type: ignore[attr-defined]
            self._release()


async def _sse(events: AsyncIterator[Event], request_id: str) -> AsyncIterator[bytes]:
    """The events as SSE frames, every frame ready at the same moment sent in one write.

    The events are produced in a task of their own: while the model streams, each piece
    goes out when it arrives, and what a model produces without waiting (the extractive
    model's whole reply) leaves in one write instead of one system call per word.
    """
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
                async for name, payload in stream:
                    queue.put_nowait(_frame(name, payload))
        except Exception:
            _log.exception("request %s failed while streaming", request_id)
            queue.put_nowait(_frame("error", ErrorEvent(code="internal", message=_INTERNAL, request_id=request_id)))
            queue.put_nowait(_frame("done", DoneEvent(request_id=request_id)))
        finally:
            queue.put_nowait(None)

    producer = asyncio.create_task(produce())
    try:
        while True:
            frames = [await queue.get()]
            while not queue.empty():
                frames.append(queue.get_nowait())
            ended = frames[-1] is None
            chunk = b"".join(frame for frame in frames if frame is not None)
            if chunk:
                yield chunk
            if ended:
                return
    finally:
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
    try:
        ask = AskRequest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors(include_input=False)
        )
        expected = "(expected {question, scope?, language?, stream?})"
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
    max_body_bytes: int = MAX_BODY_BYTES,
    max_question_chars: int = MAX_QUESTION_CHARS,
) -> Starlette:
    """The HTTP app over a loaded workspace and model; ``token`` None serves without auth.

    The app owns the model from here on: it closes it (``aclose``) when the server stops.
    ``app.state.slots.in_flight`` counts the questions being answered.
    """
    auth = BearerAuth(token)
    slots = Slots(max_concurrency)
    settings = workspace.config.model
    openapi = openapi_document(
        max_body_bytes=max_body_bytes, max_question_chars=max_question_chars, max_concurrency=max_concurrency
    )

    async def ask(request: Request) -> Response:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        taken = False
        try:
            denied = auth.denial(request, request_id)
            if denied is not None:
                return denied
            question = _parse(await _read_body(request, max_body_bytes), max_question_chars)
            if not slots.try_take():
                busy = f"{slots.limit} questions are being answered; retry in a second"
                raise _Problem(503, "busy", busy, {"Retry-After": "1"})
            taken = True
            events = answer_events(workspace, model, question, request_id=request_id, started=started)
            if question.stream:
                taken = False  # the stream gives the slot back when it ends
                return _EventStream(_sse(events, request_id), slots.give_back, request_id)
            result = await _collect(events, request_id)
            status = 502 if result.error is not None else 200
            headers = {"X-Request-Id": request_id}
            if result.timing is not None:
                headers["Server-Timing"] = _server_timing(result.timing)
            return JSONResponse(result.model_dump(mode="json"), status_code=status, headers=headers)
        except _Problem as problem:
            return _error_response(problem.status, problem.code, problem.message, request_id, problem.headers)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody is left to read it
        except Exception:
            _log.exception("request %s failed", request_id)
            return _error_response(500, "internal", _INTERNAL, request_id)
        finally:
            if taken:
                slots.give_back()

    async def healthz(request: Request) -> Response:
        health = Health(
            corpus=workspace.corpus.fingerprint,
            pages=len(workspace.corpus.pages),
            model=ModelInfo(provider=settings.provider, name=settings.name),
            auth="bearer" if auth.enabled else "off",
            in_flight=slots.in_flight,
            max_concurrency=slots.limit,
        )
        return JSONResponse(health.model_dump())

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = "no such endpoint; see /openapi.json" if status == 404 else str(getattr(exc, "detail", "error"))
        return _error_response(status, "not_found" if status == 404 else "http_error", message, "-")

    async def internal_error(request: Request, exc: Exception) -> Response:
        _log.error("unhandled failure on %s", request.url.path, exc_info=exc)
        return _error_response(500, "internal", _INTERNAL, "-")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Streamed replies run in an anyio task group; opening one now loads anyio's asyncio
        # backend (tens of milliseconds) before the first question instead of during it.
        async with anyio.create_task_group():
            pass
        try:
            yield
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    app = Starlette(
        routes=[
            Route("/v1/ask", ask, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/openapi.json", openapi_json, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan,
    )
    app.state.slots = slots
    return app


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port); ConfigError when it cannot bind."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        family, kind, proto, _, address = found[0]
        # Naming the protocol lets asyncio turn Nagle off; otherwise small events wait on delayed ACKs.
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pass another --port (0 picks a free one), or stop the process that holds this one",
        ) from None
    sock.listen(2048)  # connections made before uvicorn accepts wait in the backlog
    return sock


def url_of(sock: socket.socket) -> str:
    """The base URL a bound socket serves."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn(app: Starlette, *, access_log: bool, log_config: dict | None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        access_log=access_log,
        log_config=log_config,
        lifespan="on",
        server_header=False,
        # Longer than clients keep idle connections (4 to 5 s), so the server never closes
        # one just as a client reuses it.
        timeout_keep_alive=30,
        timeout_graceful_shutdown=3,
    )
    return uvicorn.Server(config)


def run_server(app: Starlette, sock: socket.socket, *, access_log: bool = False) -> None:
    """Serve ``app`` on a socket from ``bind`` until interrupted (Ctrl-C or SIGTERM)."""
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    # The server's own lines (failures by request id) go where uvicorn's go, in its format.
    log_config["loggers"]["docpilot"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    _uvicorn(app, access_log=access_log, log_config=log_config).run(sockets=[sock])


@contextlib.contextmanager
def serve_in_thread(app: Starlette, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` from a background thread; yields its base URL and stops it on exit."""
    sock = bind(host, port)
    server = _uvicorn(app, access_log=False, log_config=None)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="docpilot-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {url_of(sock)} did not start")
            time.sleep(0.01)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
