"""How a run's questions travel: through the proxy the environment names, and what a cut reply becomes.

Both askers of a run over HTTP (a target, DocPilot's own server) use one session per
run, routed once for the assistant's URL (``net.connection.routed_session``). The
servers here are real sockets on 127.0.0.1 (``tests.support.scripted_http``): a proxy
sees the request in absolute form with its credentials, and a reply cut mid-body is
an incomplete turn, never an answer.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from docpilot.api.client import RemoteTurn, ask
from docpilot.config.target import Target
from docpilot.errors import ConfigError
from docpilot.net.connection import routed_session
from docpilot.targets.ask import Endpoint, ask_target
from tests.support.scripted_http import Reply, Request, scripted

ANSWER = {"answer": "Export ACME_TOKEN before you deploy.", "sources": []}
SSE_HEAD = {"content-type": "text/event-stream"}


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def _target(url: str, kind: str = "json") -> Target:
    reply = {"kind": kind, "answer": "answer"} if kind == "json" else {
        "kind": "sse", "answer": "t", "delta_event": "delta", "end_event": "end"}
    return Target.model_validate({"url": url, "body": {"query": "{question}"}, "reply": reply})


def _ask_target(target: Target) -> RemoteTurn:
    async def run() -> RemoteTurn:
        async with routed_session(target.url, connections=2) as session:
            return await ask_target(session, Endpoint.open(target), "How do I deploy?", None, "q")

    return asyncio.run(run())


def _answering(seen: list[Request]):
    """A script that keeps each request in ``seen`` and answers every one with ``ANSWER``."""

    def answer(n: int, request: Request) -> Reply:
        seen.append(request)
        return Reply(200, {"content-type": "application/json"}, json.dumps(ANSWER).encode())

    return answer


def test_a_target_is_asked_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Request] = []
    with scripted(_answering(seen)) as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url.replace("http://", "http://ops:s3cret@"))
        turn = _ask_target(_target("http://assistant.invalid/ask"))
    assert turn.error is None and turn.answer == ANSWER["answer"]
    [request] = seen
    assert request.method == "POST" and request.path == "http://assistant.invalid/ask"  # absolute form: a proxy
    assert request.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"ops:s3cret").decode()
    assert json.loads(request.body) == {"query": "How do I deploy?"}


def test_no_proxy_sends_the_question_straight_to_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    direct: list[Request] = []
    with scripted(_answering(direct)) as url:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        turn = _ask_target(_target(f"{url}/ask"))
    assert turn.error is None and [r.path for r in direct] == ["/ask"]


def test_a_proxy_the_clients_cannot_speak_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")

    async def run() -> None:
        async with routed_session("https://assistant.invalid/ask"):
            pass  # pragma: no cover

    with pytest.raises(ConfigError, match="socks5 proxy"):
        asyncio.run(run())


def test_a_target_stream_cut_mid_body_is_incomplete_not_an_answer() -> None:
    pieces = [b'event: delta\ndata: {"t": "Export ACME_TOKEN"}\n\n', b'event: delta\ndata: {"t": " bef']
    with scripted(lambda n, request: Reply(200, SSE_HEAD, pieces=pieces, cut=True)) as url:
        turn = _ask_target(_target(f"{url}/sse", kind="sse"))
    assert turn.error_code == "incomplete" and turn.answer == ""


def test_a_server_stream_cut_mid_body_is_incomplete_not_an_answer() -> None:
    pieces = [b'event: retrieval\ndata: {"hits":[],"primed":[]}\n\n', b'event: token\ndata: {"text":"Export"}\n\n']

    async def run(base: str) -> RemoteTurn:
        async with routed_session(base, connections=1) as session:
            return await ask(session, base, "How do I deploy?")

    with scripted(lambda n, request: Reply(200, SSE_HEAD, pieces=pieces, cut=True)) as url:
        turn = asyncio.run(run(url))
    assert turn.error_code == "incomplete" and turn.error.startswith("the stream ended before its `done` event")


def test_a_session_asks_question_after_question_over_one_connection() -> None:
    seen: list[Request] = []

    async def run(url: str) -> list[RemoteTurn]:
        async with routed_session(url, connections=4) as session:
            endpoint = Endpoint.open(_target(f"{url}/ask"))
            return [await ask_target(session, endpoint, f"Question {i}?", None, f"q{i}") for i in range(3)]

    with scripted(_answering(seen)) as url:
        turns = asyncio.run(run(url))
    assert [t.error for t in turns] == [None, None, None]
    assert len(seen) == 3 and len({r.peer for r in seen}) == 1  # kept alive from one question to the next
