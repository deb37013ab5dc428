"""Assistants DocPilot did not build: one Starlette app under uvicorn on 127.0.0.1 speaking four other APIs.

Every shape answers from one script (question → answer, the section ids it shows as
sources, whether it refuses), and writes those sources in its own way, so a test can
check the mapping back to section ids and the metrics computed from them:

    POST /api/chat      JSON: {"query", "request_id"} → {"result": {"text", "refused"}, "documents": [{"link"}]},
                        with a `Server-Timing` header; needs `X-Api-Key: k-secret`
    POST /sse/ask       SSE with named events: `sources` ({"items": [{"path": "/page/guide/auth/#tokens"}]}),
                        `delta` ({"t": "..."}) pieces, `done`
    POST /rag/invoke    LangServe: {"input": {"question"}} → {"output": {"answer", "context": [{"metadata":
                        {"source": "guide/auth.md#tokens"}}]}, "metadata": {"run_id"}}
    POST /rag/stream    LangServe's stream: `metadata`, `data` chunks ({"context": [...]} then {"answer": "..."}), `end`
    POST /ndjson        NDJSON lines: {"sources": [...]}, {"token": "..."}..., {"done": true} (with
                        "citations": [url or n, ...] when the script cites apart from the text)
    POST /api/cited     JSON with citations apart from the text: {"answer", "sources": [{"url"}],
                        "citations": [{"url"} or n, ...]}
    POST /rag/busy      /rag/invoke behind a gate that answers ``Script.busy_status`` to the first
                        ``Script.busy`` requests (all of them when it is negative)
    POST /html          an HTML error page with status 200 (a proxy's login page)
    POST /v1/stream     a vendor's SSE API: {"query"} → `sources` ({"sources": [{"url"}]}, URLs
                        https://docs.example/<page>/#<anchor>, or the page alone), `delta` ({"delta"}),
                        `end`, with `Server-Timing`; needs `X-Api-Key: k-secret`
    POST /api/search    the JSON API's ranking alone: {"query"} → {"hits": [{"link", "score"}]}; needs the key

The SSE stream sends a `citations` event ({"items": [{"path"} or n, ...]}) before `done`
when the script cites apart from the text. A request's sources are recorded in
``Script.shown`` (question → section ids), the ranking the metrics must read.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.openai_server import _bind, running

BASE = "https://docs.acme.test/"
VENDOR_DOCS = "https://docs.example/"
KEY = "k-secret"


@dataclass(frozen=True)
class Scripted:
    """What the assistant says to one question."""

    answer: str
    sources: list[str] = field(default_factory=list)
    """Section ids, in the order shown."""
    refused: bool = False
    cited: list[str | int] | None = None
    """What the answer cites apart from its text: section ids (sent as sources are) or 1-based numbers
    into the sources; None: the shapes that can send citations send none (`/api/cited` an empty list)."""


@dataclass
class Script:
    """The answers of every shape, and the sources each request showed."""

    answers: dict[str, Scripted] = field(default_factory=dict)
    delay_s: float = 0.0
    """A wait before each reply (a stream waits it between its first and second delta)."""
    shown: dict[str, list[str]] = field(default_factory=dict)
    in_flight: int = 0
    peak: int = 0
    """The most JSON questions answered at once."""
    busy: int = 0
    """Requests to `/rag/busy` still to be answered `busy_status`; negative: every one."""
    busy_status: int = 503
    retry_after: str | None = None
    """The `Retry-After` header of a busy reply; None sends none."""
    busy_requests: int = 0
    """Requests `/rag/busy` has seen."""
    vendor_requests: int = 0
    """Requests `/v1/stream` has seen."""
    searches: int = 0
    """Requests `/api/search` has seen."""
    peers: set[tuple[str, int]] = field(default_factory=set)
    """The client addresses (host, port) the streaming routes were asked from: one per connection."""

    def take(self, question: str) -> Scripted:
        scripted = self.answers.get(question, Scripted("I do not know that."))
        self.shown[question] = list(scripted.sources)
        return scripted


def _page_url(section: str) -> str:
    page, _, anchor = section.partition("#")
    return f"/page/{page}/" + (f"#{anchor}" if anchor else "")


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def _cited(scripted: Scripted, as_source: Callable[[str], object]) -> list[object]:
    """The script's citations as a reply writes them: a number as it is, a section id as a source."""
    return [item if isinstance(item, int) else as_source(item) for item in scripted.cited or []]


def _sse(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class _Shapes:
    """The routes of every shape, answering from one script."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def chat(self, request: Request) -> Response:
        if request.headers.get("x-api-key") != KEY:
            return JSONResponse({"detail": "invalid API key"}, status_code=401)
        body = await request.json()
        began = time.perf_counter()
        scripted = self.script.take(body["query"])
        self.script.in_flight += 1
        self.script.peak = max(self.script.peak, self.script.in_flight)
        try:
            await asyncio.sleep(self.script.delay_s)
        finally:
            self.script.in_flight -= 1
        took = (time.perf_counter() - began) * 1000
        reply = {"result": {"text": scripted.answer, "refused": scripted.refused},
                 "documents": [{"link": BASE + s.replace("#", ".html#", 1) if "#" in s else BASE + s + ".html"}
                               for s in scripted.sources],
                 "request_id": body.get("request_id")}
        return JSONResponse(reply, headers={"Server-Timing": f'retrieve;dur=1.5;desc="search", generate;dur={took:.1f}'})

    async def sse(self, request: Request) -> Response:
        self.script.peers.add((request.client.host, request.client.port))
        scripted = self.script.take((await request.json())["q"])

        async def events() -> AsyncIterator[bytes]:
            yield _sse("sources", {"items": [{"path": _page_url(s)} for s in scripted.sources]})
            for n, piece in enumerate(_pieces(scripted.answer)):
                yield _sse("delta", {"t": piece})
                if n == 0:
                    await asyncio.sleep(self.script.delay_s)
            if scripted.cited is not None:
                yield _sse("citations", {"items": _cited(scripted, lambda s: {"path": _page_url(s)})})
            yield _sse("done", {"ok": True})

        return StreamingResponse(events(), media_type="text/event-stream")

    async def vendor(self, request: Request) -> Response:
        """A vendor's streaming API: a key, `sources`, `delta` and `end` events, docs URLs with `/#anchor`."""
        self.script.vendor_requests += 1
        if request.headers.get("x-api-key") != KEY:
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        scripted = self.script.take((await request.json())["query"])
        urls = [VENDOR_DOCS + page + "/" + (f"#{anchor}" if anchor else "")
                for page, _, anchor in (s.partition("#") for s in scripted.sources)]

        async def events() -> AsyncIterator[bytes]:
            yield _sse("sources", {"sources": [{"url": u, "title": u} for u in urls]})
            for n, piece in enumerate(_pieces(scripted.answer)):
                yield _sse("delta", {"delta": piece})
                if n == 0:
                    await asyncio.sleep(self.script.delay_s)
            yield _sse("end", {})

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Server-Timing": "search;dur=4.2, llm;dur=31.5"})

    @staticmethod
    def _context(scripted: Scripted) -> list[dict]:
        return [{"page_content": "...", "metadata": {"source": s.replace("#", ".md#", 1) if "#" in s else s + ".md"}}
                for s in scripted.sources]

    async def invoke(self, request: Request) -> Response:
        scripted = self.script.take((await request.json())["input"]["question"])
        await asyncio.sleep(self.script.delay_s)
        return JSONResponse({"output": {"answer": scripted.answer, "context": self._context(scripted)},
                             "metadata": {"run_id": "r-1", "feedback_tokens": []}})

    async def stream(self, request: Request) -> Response:
        self.script.peers.add((request.client.host, request.client.port))
        scripted = self.script.take((await request.json())["input"]["question"])

        async def events() -> AsyncIterator[bytes]:
            yield _sse("metadata", {"run_id": "r-1"})
            yield _sse("data", {"context": self._context(scripted)})
            for n, piece in enumerate(_pieces(scripted.answer)):
                yield _sse("data", {"answer": piece})
                if n == 0:
                    await asyncio.sleep(self.script.delay_s)
            yield b"event: end\n\n"  # as LangServe ends a stream: a named event with no data

        return StreamingResponse(events(), media_type="text/event-stream")

    async def ndjson(self, request: Request) -> Response:
        self.script.peers.add((request.client.host, request.client.port))
        scripted = self.script.take((await request.json())["question"])

        async def lines() -> AsyncIterator[bytes]:
            yield (json.dumps({"sources": [BASE + _page_url(s).lstrip("/") for s in scripted.sources]}) + "\n").encode()
            for piece in _pieces(scripted.answer):
                yield (json.dumps({"token": piece}) + "\n").encode()
            end: dict[str, object] = {"done": True}
            if scripted.cited is not None:
                end["citations"] = _cited(scripted, lambda s: BASE + _page_url(s).lstrip("/"))
            yield (json.dumps(end) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def cited(self, request: Request) -> Response:
        scripted = self.script.take((await request.json())["question"])
        return JSONResponse({"answer": scripted.answer,
                             "sources": [{"url": BASE + _page_url(s).lstrip("/")} for s in scripted.sources],
                             "citations": _cited(scripted, lambda s: {"url": BASE + _page_url(s).lstrip("/")})})

    async def busy(self, request: Request) -> Response:
        self.script.busy_requests += 1
        if self.script.busy != 0:
            if self.script.busy > 0:
                self.script.busy -= 1
            headers = {"Retry-After": self.script.retry_after} if self.script.retry_after is not None else {}
            return JSONResponse({"detail": "busy, come back later"}, status_code=self.script.busy_status,
                                headers=headers)
        return await self.invoke(request)

    async def search(self, request: Request) -> Response:
        if request.headers.get("x-api-key") != KEY:
            return JSONResponse({"detail": "invalid API key"}, status_code=401)
        self.script.searches += 1
        scripted = self.script.take((await request.json())["query"])
        return JSONResponse({"hits": [{"link": BASE + s.replace("#", ".html#", 1) if "#" in s else BASE + s + ".html",
                                       "score": 1.0 / n} for n, s in enumerate(scripted.sources, start=1)]})

    async def html(self, request: Request) -> Response:
        return HTMLResponse("<html><body>Please sign in</body></html>")


def build_app(script: Script) -> Starlette:
    shapes = _Shapes(script)
    return Starlette(routes=[
        Route("/api/chat", shapes.chat, methods=["POST"]),
        Route("/sse/ask", shapes.sse, methods=["POST"]),
        Route("/rag/invoke", shapes.invoke, methods=["POST"]),
        Route("/rag/stream", shapes.stream, methods=["POST"]),
        Route("/ndjson", shapes.ndjson, methods=["POST"]),
        Route("/api/cited", shapes.cited, methods=["POST"]),
        Route("/rag/busy", shapes.busy, methods=["POST"]),
        Route("/html", shapes.html, methods=["POST"]),
        Route("/api/search", shapes.search, methods=["POST"]),
        Route("/v1/stream", shapes.vendor, methods=["POST"]),
    ])


@contextmanager
def serve_shapes(script: Script) -> Iterator[str]:
    """Serve ``script`` in every shape on a free port of 127.0.0.1 in a background thread; yields the base URL."""
    sock = _bind()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(script), log_config=None, access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=1))
    with running(server, sock, "the test assistant"):
        yield f"http://127.0.0.1:{port}"
