"""A chat assistant on 127.0.0.1 that records every request it is sent and keeps conversation threads.

It stands for the assistants a follow-up reaches in each conversation mode
(docs/targets.md#conversations): one that reads the earlier turns from the body, and one
that keeps the thread itself and names it in every reply, as kapa's API and OpenAI's
Assistants do with a ``thread_id``. A real HTTP server (Starlette under uvicorn), so a
target's requests go through real sockets; every request is kept, in arrival order, as
its method, path, headers and JSON body.

    POST /chat                       {"question": ..., "thread_id"?: ...} or any body holding "question"
                                     → {"answer", "sources", "thread_id"}; a body without a thread (or
                                       with null) opens a new one, ``thread-1``, ``thread-2``, ...
    POST /threads/{thread}/chat      the same, in the thread the path names (404 for one never opened)
    POST /sse/chat                   the same reply as events: ``thread`` {"id"}, ``delta`` {"text"}
                                     pieces, then ``done``
    POST /messages                   an OpenAI-style chat body {"messages": [...]}: the question is the
                                     last ``user`` message

The answer is ``Answer <n> to: <question> [1]``, n counting every question asked, so a test
can tell which turn's answer a later request carried. Each thread keeps the questions asked
in it (``Recorder.threads``).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.openai_server import _bind, running

SOURCE = "https://docs.acme.test/guide/auth.html#tokens"
"""The one source every reply names."""


@dataclass(frozen=True)
class Recorded:
    """One request as the assistant received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Request headers, names lower-cased."""
    body: Any
    """The decoded JSON body."""


@dataclass
class Recorder:
    """What the assistant was sent, and the threads it keeps."""

    requests: list[Recorded] = field(default_factory=list)
    threads: dict[str, list[str]] = field(default_factory=dict)
    """Thread id → the questions asked in it, in order."""
    _asked: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, question: str, thread: str | None) -> dict[str, Any] | None:
        """The reply to ``question`` asked in ``thread`` (None opens one); None for a thread never opened."""
        with self._lock:
            if thread is None:
                thread = f"thread-{len(self.threads) + 1}"
                self.threads[thread] = []
            elif thread not in self.threads:
                return None
            self.threads[thread].append(question)
            n = next(self._asked)
        return {"answer": f"Answer {n} to: {question} [1]", "sources": [SOURCE], "thread_id": thread}


def _question(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        return next(m["content"] for m in reversed(body["messages"]) if m.get("role") == "user")
    return str(body.get("question", "")) if isinstance(body, dict) else ""


def build_app(recorder: Recorder) -> Starlette:
    async def received(request: Request) -> Any:
        body = json.loads(await request.body() or b"null")
        recorder.requests.append(Recorded(request.method, request.url.path,
                                          {k.lower(): v for k, v in request.headers.items()}, body))
        return body

    def thread_of(body: Any, request: Request) -> str | None:
        named = request.path_params.get("thread") or (body.get("thread_id") if isinstance(body, dict) else None)
        return named or None

    async def chat(request: Request) -> Response:
        body = await received(request)
        reply = recorder.answer(_question(body), thread_of(body, request))
        if reply is None:
            return JSONResponse({"detail": "no such thread"}, status_code=404)
        return JSONResponse(reply)

    async def sse(request: Request) -> Response:
        body = await received(request)
        reply = recorder.answer(_question(body), thread_of(body, request))
        if reply is None:
            return JSONResponse({"detail": "no such thread"}, status_code=404)

        async def events() -> AsyncIterator[bytes]:
            yield f"event: thread\ndata: {json.dumps({'id': reply['thread_id']})}\n\n".encode()
            yield f"event: sources\ndata: {json.dumps({'sources': reply['sources']})}\n\n".encode()
            for word in reply["answer"].split(" "):
                yield f"event: delta\ndata: {json.dumps({'text': word + ' '})}\n\n".encode()
            yield b"event: done\ndata: {}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[
        Route("/chat", chat, methods=["POST"]),
        Route("/threads/{thread}/chat", chat, methods=["POST"]),
        Route("/sse/chat", sse, methods=["POST"]),
        Route("/messages", chat, methods=["POST"]),
    ])


@contextmanager
def serve_recorder(recorder: Recorder) -> Iterator[str]:
    """Serve the assistant on a free port of 127.0.0.1 in a background thread; yields the base URL."""
    sock = _bind()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(recorder), log_config=None, access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=1))
    with running(server, sock, "the recording assistant"):
        yield f"http://127.0.0.1:{port}"
