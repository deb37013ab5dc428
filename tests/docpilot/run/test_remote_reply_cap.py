"""The served assistant's path is capped too: the server cuts its model's reply, and the client cuts the server's.

Real servers on 127.0.0.1 throughout: ``docpilot serve``'s app over an OpenAI-compatible
endpoint that never stops, the same app over a model whose stream never ends, and a
misbehaving server speaking the ask protocol that the eval's client reads.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from docpilot.api.client import RemoteTurn, ask
from docpilot.assistant.workspace import open_workspace
from docpilot.config.model import Config
from docpilot.models.base import Prompt
from docpilot.models.registry import build_model
from docpilot.models.wire import reply_char_limit
from docpilot.server.app import create_app, serve_in_thread
from tests.support.openai_server import OpenAIScript, Reply, serve_openai
from tests.support.scratch import scratch_folder

DATA = Path(__file__).resolve().parents[2] / "data" / "pipeline"
CACHE = scratch_folder("docpilot-test-reply-cap-")  # the search index, out of the checkout
QUESTION = "How do I install Acme?"


def _workspace(**model: object):
    config = Config.model_validate({"corpus": {"docs": str(DATA / "docs")}, "cache_dir": CACHE, "model": model})
    return open_workspace(config, use_cache=False)


def _ask(url: str, **options: object) -> RemoteTurn:
    async def run() -> RemoteTurn:
        async with aiohttp.ClientSession() as client:
            return await ask(client, url, QUESTION, **options)  # type: ignore[arg-type]

    return asyncio.run(run())


def _wait_for(condition, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


# Regression: the served assistant kept every piece of a model reply that never ended.
def test_the_server_cuts_an_endless_openai_reply_and_the_client_names_the_cause():
    script = OpenAIScript(default=Reply(answer="and more ", endless=True))
    with serve_openai(script) as endpoint:
        ws = _workspace(provider="openai", name="scripted", base_url=endpoint, max_tokens=32, timeout_s=20)
        app = create_app(ws, build_model(ws.config.model, corpus=ws.corpus), token=None)
        with serve_in_thread(app) as url:
            started = time.monotonic()
            turn = _ask(url, max_tokens=32)
            assert time.monotonic() - started < 10
        assert _wait_for(lambda: script.in_flight == 0)  # the server closed its connection to the endpoint
    assert turn.error_code == "reply_too_long" and turn.error.startswith("reply_too_long:")
    assert "max_tokens" in turn.error
    assert len(turn.answer) <= reply_char_limit(32)


class EndlessModel:
    """A model whose stream never ends; it notes when the server closes it."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    async def stream(self, prompt: Prompt) -> AsyncIterator[tuple[str, str]]:
        try:
            while True:
                yield "token", "again "
                await asyncio.sleep(0)
        finally:
            self.closed.set()

    async def complete(self, prompt: Prompt):  # pragma: no cover - the server streams
        raise NotImplementedError


def test_the_server_caps_any_model_stream_and_closes_it():
    ws = _workspace(max_tokens=16, timeout_s=20)
    model = EndlessModel()
    with serve_in_thread(create_app(ws, model, token=None)) as url:
        turn = _ask(url, max_tokens=16)
    assert model.closed.is_set()
    assert turn.error_code == "reply_too_long"
    assert len(turn.answer) <= reply_char_limit(16)


class _Misbehaving:
    """A server of the ask protocol that streams token events without end, or one line without end."""

    def __init__(self, *, one_line: bool) -> None:
        self.one_line = one_line
        self.ended = threading.Event()  # set once the client went away and the stream stopped

    async def _body(self) -> AsyncIterator[bytes]:
        try:
            if self.one_line:
                yield b'event: token\ndata: {"text": "'
                while True:
                    yield b"x" * 65_536
                    await asyncio.sleep(0)
            while True:
                yield b"".join(b"event: token\ndata: " + json.dumps({"text": "loop "}).encode() + b"\n\n"
                               for _ in range(64))
                await asyncio.sleep(0)
        finally:
            self.ended.set()

    def app(self) -> Starlette:
        async def answer(request: Request) -> StreamingResponse:
            return StreamingResponse(self._body(), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/ask", answer, methods=["POST"])])


@pytest.fixture(params=["events", "one line"])
def misbehaving(request) -> Iterator[tuple[str, _Misbehaving]]:
    server = _Misbehaving(one_line=request.param == "one line")
    with serve_in_thread(server.app()) as url:
        yield url, server


# Regression: the eval's client read a server's stream into memory without bound.
def test_the_client_cuts_a_server_that_never_stops(misbehaving):
    url, server = misbehaving
    started = time.monotonic()
    turn = _ask(url, max_tokens=64)
    assert time.monotonic() - started < 10
    assert turn.error_code == "reply_too_long" and "max_tokens=64" in turn.error
    # The event that passed the cap is the last one taken.
    assert len(turn.answer) <= reply_char_limit(64) + len("loop ") and len(turn.events) <= reply_char_limit(64) + 64
    assert _wait_for(server.ended.is_set)  # leaving the stream closed its connection
