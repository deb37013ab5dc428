"""A local OpenAI-compatible chat server whose replies a test scripts in advance.

It speaks the wire format of ``POST /v1/chat/completions`` as the hosted service does:
a streamed reply is a series of ``data: {chat.completion.chunk}`` server-sent events
(a role chunk, optional reasoning chunks, answer chunks, a finish chunk, a usage chunk
with no choices when ``stream_options.include_usage`` is set) closed by
``data: [DONE]``; errors are ``{"error": {...}}`` bodies. Because it is a real HTTP
server (Starlette under uvicorn on 127.0.0.1), clients are tested through their real
sockets, timeouts and connection handling.

What each request gets is chosen in this order: the next reply a test ``enqueue``\\ d
(never taken by the one-token probe a CLI run sends first), else the reply registered
for a text the request's last message contains in ``by_content``, else the reply
registered for the request's model name in ``by_model``, else the ``default``. Every request is kept in ``history`` (headers and JSON body).

    script = OpenAIScript()
    with serve_openai(script) as base_url:
        script.enqueue(Reply.failure(429, retry_after="1"), Reply(answer="Use tokens [1]."))
        ...  # point a client at base_url
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.child_server import serve_in_process

FINGERPRINT = "fp_docpilot_test"


@dataclass(frozen=True)
class Reply:
    """One scripted reply; the defaults give a plain streamed answer."""

    answer: str = "Set the token in the Authorization header [1]."
    """The answer text, sent as ``delta.content`` pieces."""
    reasoning: str = ""
    """Thinking sent before the answer, as ``delta.<reasoning_field>`` pieces."""
    reasoning_field: str = "reasoning_content"
    """The delta key that carries reasoning (``reasoning_content`` or ``reasoning``)."""
    pieces: int = 4
    """How many deltas the answer (and, apart, the reasoning) is cut into."""
    latency_s: float = 0.0
    """Wait before the response starts, as a busy service would."""
    first_token_delay_s: float = 0.0
    """Wait between the last reasoning chunk (or the role chunk) and the first answer chunk."""
    status: int = 200
    """HTTP status; anything but 200 sends an OpenAI-style error body."""
    error_message: str = "scripted failure"
    """The ``error.message`` of a failure body."""
    retry_after: str | None = None
    """A ``Retry-After`` header for a failure (seconds or an HTTP date)."""
    disconnect_after: int | None = None
    """Drop the connection after this many chunks (0: right after the headers)."""
    malformed_after: int | None = None
    """Send a broken JSON data line after this many chunks."""
    error_after: int | None = None
    """Send an ``{"error": ...}`` chunk after this many chunks, as vLLM does when generation fails."""
    omit_done: bool = False
    """End the body cleanly but without ``data: [DONE]``."""
    finish_reason: str = "stop"
    """The finish chunk's ``finish_reason`` (``length``: the answer hit max_tokens)."""
    interrupt_after_words: int | None = None
    """Send this many words of the answer, then ``data: [DONE]`` with no finish chunk: what
    llama.cpp's server does, by default, to a turn in flight when the next request arrives."""
    stream: bool | None = None
    """False: answer with one JSON completion even when asked to stream."""
    comment: bool = False
    """Send an SSE comment line (``: keep-alive``) before and between chunks."""
    endless: bool = False
    """After the reasoning, send ``answer`` as a delta again and again and never finish: a service
    that ignores max_tokens. Only the client closing the connection ends it."""
    running_usage: bool = False
    """Send the usage so far (words as tokens) in every chunk, as vLLM's ``continuous_usage_stats`` does."""
    numbered: bool = False
    """Latency server only: end each answer with the request's number, so that no two answers are alike
    (as a real model's are not, where a fixed answer would let anything keyed on the text do its work once)."""

    @classmethod
    def failure(cls, status: int, message: str = "scripted failure", *, retry_after: str | None = None) -> Reply:
        """An error reply with the given status."""
        return cls(status=status, error_message=message, retry_after=retry_after)


@dataclass(frozen=True)
class ReceivedRequest:
    """What the server was sent, for assertions."""

    headers: dict[str, str]
    """Request headers, names lower-cased."""
    body: dict[str, Any]
    """The decoded JSON body."""
    peer: tuple[str, int] | None = None
    """The client's address and port: one port for many requests means a reused connection."""


@dataclass
class OpenAIScript:
    """The replies a server will give, and the requests it received."""

    default: Reply = field(default_factory=Reply)
    """The reply when nothing else applies."""
    by_content: dict[str, Reply] = field(default_factory=dict)
    """Replies chosen by a text that the request's last message contains (first match wins)."""
    by_model: dict[str, Reply] = field(default_factory=dict)
    """Replies chosen by the request's ``model`` field."""
    history: list[ReceivedRequest] = field(default_factory=list)
    """Every request, in arrival order."""
    in_flight: int = 0
    """Requests received and not yet fully answered."""
    peak_in_flight: int = 0
    """The most requests that were in flight at once."""
    _queue: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enqueue(self, *replies: Reply) -> None:
        """Give these replies, in order, to the next requests."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def turns(self) -> list[ReceivedRequest]:
        """The requests that were turns: ``history`` without the one-token endpoint probe a run sends first."""
        return [r for r in self.history if not (r.body.get("max_tokens") == 1 and not r.body.get("stream"))]

    def reset(self, default: Reply | None = None) -> None:
        """Forget queued replies, routes and history, e.g. between tests."""
        with self._lock:
            self._queue.clear()
            self.by_content.clear()
            self.by_model.clear()
            self.history.clear()
            self.default = default or Reply()
            self.peak_in_flight = self.in_flight

    def _arrive(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _take(self, received: ReceivedRequest) -> Reply:
        with self._lock:
            self.history.append(received)
            # The one-token endpoint probe a CLI run sends first does not take a queued reply.
            probe = received.body.get("max_tokens") == 1 and not received.body.get("stream")
            if self._queue and not probe:
                return self._queue.popleft()
            messages = received.body.get("messages") or [{}]
            last = str(messages[-1].get("content", "")) if isinstance(messages[-1], dict) else ""
            for text, reply in self.by_content.items():
                if text in last:
                    return reply
            return self.by_model.get(str(received.body.get("model")), self.default)


class _Disconnect(Exception):
    """Raised inside a stream to make uvicorn drop the connection mid-body."""


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    # Word counts stand in for tokens: deterministic, and the same for every client.
    return _usage_so_far(body, len(reply.answer.split()) + len(reply.reasoning.split()))


def _usage_so_far(body: dict[str, Any], completion: int) -> dict[str, int]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(body: dict[str, Any], choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-docpilot-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        **extra,
    }


def _chunks(body: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any] | float]:
    """The stream's chunks in order; a float is a pause before the next one."""
    with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    extra = {"usage": None} if with_usage else {}

    def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    yield _chunk(body, [choice({"role": "assistant", "content": "", "refusal": None})], **extra)
    said = 0  # words sent: the completion tokens of running usage

    def usage(text: str = "") -> dict[str, Any]:
        nonlocal said
        said += len(text.split())
        return {**extra, "usage": _usage_so_far(body, said)} if reply.running_usage else extra

    for piece in _split(reply.reasoning, reply.pieces):
        yield _chunk(body, [choice({"content": None, reply.reasoning_field: piece})], **usage(piece))
    if reply.first_token_delay_s:
        yield float(reply.first_token_delay_s)
    if reply.endless:
        while True:
            for _ in range(64):
                yield _chunk(body, [choice({"content": reply.answer})], **usage(reply.answer))
            yield 0.0  # a pause sends what is pending, so the server holds no more than 64 chunks
    if reply.interrupt_after_words is not None:
        # Word by word, as a server generating token by token; then the end mark, unfinished.
        for word in reply.answer.split(" ")[: reply.interrupt_after_words]:
            yield _chunk(body, [choice({"content": word + " "})], **extra)
        return
    for piece in _split(reply.answer, reply.pieces):
        yield _chunk(body, [choice({"content": piece})], **usage(piece))
    yield _chunk(body, [choice({}, reply.finish_reason)], **usage())
    if with_usage:
        yield _chunk(body, [], usage=_usage(body, reply))


async def _stream(body: dict[str, Any], reply: Reply) -> AsyncIterator[bytes]:
    # Chunks with no pause between them go out in one write, as a server that produced
    # them together would send them; a pause, a fault or the end flushes what is pending.
    pending: list[bytes] = []
    sent = 0
    for item in _chunks(body, reply):
        if isinstance(item, float):
            if pending:
                yield b"".join(pending)
                pending.clear()
            await asyncio.sleep(item)
            continue
        if reply.disconnect_after is not None and sent >= reply.disconnect_after:
            break
        if reply.malformed_after is not None and sent >= reply.malformed_after:
            pending.append(b'data: {"id": "chatcmpl-docpilot-test", "choices": [{"delta": {"content": "cut\n\n')
            break
        if reply.error_after is not None and sent >= reply.error_after:
            error = {"message": reply.error_message, "type": "server_error", "param": None, "code": None}
            pending.append(f"data: {json.dumps({'error': error})}\n\n".encode())
            break
        if reply.comment:
            pending.append(b": keep-alive\n\n")
        pending.append(f"data: {json.dumps(item)}\n\n".encode())
        sent += 1
    if reply.disconnect_after is not None:
        if pending:
            yield b"".join(pending)
        raise _Disconnect
    if not reply.omit_done:
        pending.append(b"data: [DONE]\n\n")
    if pending:
        yield b"".join(pending)


async def _leaving(script: OpenAIScript, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    # A streamed request is in flight until its body is sent (or cut).
    try:
        async for piece in stream:
            yield piece
    finally:
        script._leave()


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.answer, "refusal": None}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    return {
        "id": "chatcmpl-docpilot-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": _usage(body, reply),
    }


def _failure(reply: Reply) -> Response:
    if reply.status == 429:
        kind = "rate_limit_exceeded"
    else:
        kind = "server_error" if reply.status >= 500 else "invalid_request_error"
    payload = {"error": {"message": reply.error_message, "type": kind, "param": None, "code": kind}}
    headers = {"retry-after": reply.retry_after} if reply.retry_after is not None else None
    return JSONResponse(payload, status_code=reply.status, headers=headers)


def build_app(script: OpenAIScript) -> Starlette:
    """The Starlette app that plays ``script``."""

    async def chat_completions(request: Request) -> Response:
        script._arrive()
        streaming = False
        try:
            body = await request.json()
            peer = (request.client.host, request.client.port) if request.client else None
            headers = {k.lower(): v for k, v in request.headers.items()}
            reply = script._take(ReceivedRequest(headers=headers, body=body, peer=peer))
            if reply.latency_s:
                await asyncio.sleep(reply.latency_s)
            if reply.status != 200:
                return _failure(reply)
            if not body.get("stream") or reply.stream is False:
                return JSONResponse(_completion(body, reply))
            streaming = True
            return StreamingResponse(
                _leaving(script, _stream(body, reply)),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        finally:
            if not streaming:
                script._leave()

    async def stats(request: Request) -> Response:
        # How many completions were asked for: lets a caller in another process count calls.
        return JSONResponse({"requests": len(script.history)})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )


class _QuietDisconnects(logging.Filter):
    """Keeps uvicorn from logging the scripted disconnects as application crashes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return not isinstance(exc, _Disconnect)


def _bind() -> socket.socket:
    # Naming the protocol lets asyncio set TCP_NODELAY on accepted connections; without it
    # every reply on a kept-alive connection waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _server(script: OpenAIScript) -> uvicorn.Server:
    config = uvicorn.Config(
        build_app(script),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


@contextmanager
def serve_openai(script: OpenAIScript | None = None) -> Iterator[str]:
    """Serve ``script`` on a free port of 127.0.0.1 in a background thread; yields the base URL (``.../v1``)."""
    script = script if script is not None else OpenAIScript()
    sock = _bind()
    port = sock.getsockname()[1]
    server = _server(script)
    quiet = _QuietDisconnects()
    logging.getLogger("uvicorn.error").addFilter(quiet)
    try:
        with running(server, sock, "the test OpenAI server"):
            yield f"http://127.0.0.1:{port}/v1"
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)


@contextmanager
def running(server: uvicorn.Server, sock: socket.socket, what: str) -> Iterator[None]:
    """Run ``server`` on the bound ``sock`` in a background thread until the block ends; it has started when entered."""
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"server-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{what} on port {port} did not start")
            time.sleep(0.01)
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@contextmanager
def serve_openai_process(default: Reply | None = None) -> Iterator[str]:
    """Serve one reply for every request from a separate process; yields the base URL.

    For load measurements: the server's own work then does not compete with the client
    for one interpreter. There is no queue and no history across the process boundary.
    """
    with serve_in_process("tests.support.openai_server", default or Reply()) as base_url:
        yield base_url


def _serve_forever(reply_json: str) -> None:
    """Entry point of ``serve_openai_process``'s child: print the port, then serve until stopped."""
    sock = _bind()
    # Listening before the port is announced lets the parent connect at once; connections
    # made before uvicorn accepts wait in the backlog.
    sock.listen(2048)
    logging.getLogger("uvicorn.error").addFilter(_QuietDisconnects())
    print(sock.getsockname()[1], flush=True)
    _server(OpenAIScript(default=Reply(**json.loads(reply_json)))).run(sockets=[sock])


if __name__ == "__main__":
    _serve_forever(sys.argv[1])
