"""A target that misbehaves on cue: one Starlette app under uvicorn on 127.0.0.1.

``POST /ask`` takes ``{"query": ...}`` and answers JSON ``{"answer", "sources": [url, ...]}``
as a vendor's API would, unless the question names a fault:

    forever    a 200 reply whose body trickles a byte every 20 ms and never ends
    huge       a 200 MB reply holding 100,000 sources, sent in 1 MB pieces as they are read
    echo       401 whose body echoes the request's ``api-key`` header
    timing     an answer whose ``Server-Timing`` has NaN, negative, 1e308 and unusable entries
    object     an answer that is a JSON object, not text
    outside    sources on a blog outside the docs folder, and a page of the docs

``POST /sse`` streams ``delta`` events for the same questions and ends with ``end``, except
for ``forever``, which sends a delta every 20 ms and never ends. ``Hostile.requests`` counts
the requests each route took.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.openai_server import _bind, running

DOCS_URL = "https://docs.example/"
HUGE_SOURCES = 100_000
HUGE_BYTES = 200 * 1024 * 1024


class Hostile:
    """The routes, and how many requests each took."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()

    async def ask(self, request: Request) -> Response:
        self.requests["ask"] += 1
        question = (await request.json())["query"]
        if "forever" in question:
            return StreamingResponse(_trickle(), media_type="application/json")
        if "huge" in question:
            return StreamingResponse(_huge(), media_type="application/json")
        if "echo" in question:
            return JSONResponse({"error": f"invalid key {request.headers.get('api-key')}"}, status_code=401)
        if "object" in question:
            return JSONResponse({"answer": {"text": "Export ACME_TOKEN."}, "sources": []})
        headers = {}
        if "timing" in question:
            headers["Server-Timing"] = ('retrieve;dur=NaN, model;dur=-5, rank;dur=1e308, bad name;dur=2, '
                                        'embed;dur=inf, generate;dur=12.5')
        sources = [DOCS_URL + "guide/auth/#tokens"]
        if "outside" in question:
            sources = ["https://blog.example/2024/launch/", DOCS_URL + "guide/deploy/"]
        return JSONResponse({"answer": "Export ACME_TOKEN before you deploy [1].", "sources": sources},
                            headers=headers)

    async def sse(self, request: Request) -> Response:
        self.requests["sse"] += 1
        question = (await request.json())["query"]

        async def events() -> AsyncIterator[bytes]:
            yield b'event: sources\ndata: {"items": ["' + DOCS_URL.encode() + b'guide/auth/#tokens"]}\n\n'
            while "forever" in question:
                yield b'event: delta\ndata: {"t": "more "}\n\n'
                await asyncio.sleep(0.02)
            yield b'event: delta\ndata: {"t": "Export ACME_TOKEN [1]."}\n\n'
            yield b"event: end\ndata: {}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


async def _trickle() -> AsyncIterator[bytes]:
    yield b'{"answer": "'
    while True:
        yield b"a"
        await asyncio.sleep(0.02)


async def _huge() -> AsyncIterator[bytes]:
    source = json.dumps(DOCS_URL + "guide/auth/#tokens" + "x" * 2000).encode()
    piece = b", ".join([source] * 500)
    sent = 0
    yield b'{"answer": "Export ACME_TOKEN [1].", "sources": [' + piece
    sent += len(piece)
    while sent < HUGE_BYTES:
        yield b", " + piece
        sent += len(piece) + 2
        await asyncio.sleep(0)
    yield b"]}"


@contextmanager
def serve_hostile() -> Iterator[tuple[str, Hostile]]:
    """Serve the hostile target on a free port of 127.0.0.1 in a background thread; yields its base URL."""
    hostile = Hostile()
    app = Starlette(routes=[Route("/ask", hostile.ask, methods=["POST"]), Route("/sse", hostile.sse, methods=["POST"])])
    sock = _bind()
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=1))
    with running(server, sock, "the hostile target"):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", hostile
