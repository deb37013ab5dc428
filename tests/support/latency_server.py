"""An OpenAI-compatible server that answers every request exactly ``latency_s`` after it arrived.

For load measurements. The scripted server (``tests.support.openai_server``) runs
Starlette under uvicorn: about a millisecond of its own work per request, and when 32
requests arrive together the last one waits for the 31 before it, so a "200 ms"
reply there takes 204–208 ms. A benchmark that compares a run against
``records × latency / concurrency`` would count that as the harness's overhead. This
server speaks the same wire format (the chunks come from the scripted server's own
``_chunks``) straight from an asyncio protocol with httptools' parser, and schedules
each reply for the moment the request arrived plus the latency, so the time it adds
is the latency asked for and little more. The reply is made as its request arrives and
only written when it is due: when 32 replies fall due together, the last of them no
longer waits for the other 31 to be made (2.4 ms per reply at concurrency 32 measured
with a bare socket client, 1.0 ms now, as with a single request).

It serves ``POST /v1/chat/completions`` (streamed or not) and ``GET /stats`` (requests
so far; when the first since the last ``/stats`` arrived, and when the last was
answered, as ``time.time()``), keeps connections alive, and runs in its own process:

    with serve_latency_process(Reply(latency_s=0.2)) as base_url:
        ...  # point a client at base_url
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httptools

from tests.support.child_server import serve_in_process
from tests.support.openai_server import Reply, _bind, _chunks, _completion

_SSE_HEADERS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


class _Server:
    """What every connection shares: the reply and the count of completions asked for."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests = 0
        # Wall-clock times of the first completion asked for since stats were last read, and
        # of the last one sent: how long a client took to start, and to finish after it.
        self.first_request_at: float | None = None
        self.last_reply_at: float | None = None


class _Connection(asyncio.Protocol):
    """One client connection: parse requests, answer each when its latency is up."""

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._send(400, b'{"error": {"message": "malformed request"}}')
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url, self.body = b"", []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        arrived = self.loop.time()
        method = self.parser.get_method()
        if method == b"GET" and self.url == b"/stats":
            stats = {"requests": self.server.requests, "first_request_at": self.server.first_request_at,
                     "last_reply_at": self.server.last_reply_at}
            self._send(200, json.dumps(stats).encode())
            self.server.first_request_at = None
        elif method == b"POST" and self.url == b"/v1/chat/completions":
            self.server.requests += 1
            if self.server.first_request_at is None:
                self.server.first_request_at = time.time()
            # The reply is made now and only written when it is due: 32 replies due at once
            # then go out together, rather than each after the others were made.
            reply = self._reply(json.loads(b"".join(self.body) or b"{}"))
            self.loop.call_at(arrived + self.server.reply.latency_s, self._answer, reply)
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def _reply(self, body: dict[str, Any]) -> bytes:
        reply = self.server.reply
        if reply.numbered:
            reply = dataclasses.replace(reply, answer=f"{reply.answer} Reply {self.server.requests}.")
        if not body.get("stream") or reply.stream is False:
            return self._response(200, json.dumps(_completion(body, reply)).encode())
        events = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in _chunks(body, reply))
        events += b"data: [DONE]\n\n"
        return _SSE_HEADERS + b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)

    def _answer(self, reply: bytes) -> None:
        if self.transport is None:  # the client went away while it waited
            return
        self.server.last_reply_at = time.time()
        self.transport.write(reply)

    def _send(self, status: int, payload: bytes) -> None:
        self.transport.write(self._response(status, payload))

    @staticmethod
    def _response(status: int, payload: bytes) -> bytes:
        reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}[status]
        head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        return head % (status, reason, len(payload)) + payload


def _check(reply: Reply) -> None:
    # Faults, pauses and reasoning-only scripts are the scripted server's job.
    plain = Reply(answer=reply.answer, reasoning=reply.reasoning, reasoning_field=reply.reasoning_field,
                  pieces=reply.pieces, latency_s=reply.latency_s, stream=reply.stream, numbered=reply.numbered)
    if reply != plain:
        raise ValueError("the latency server plays plain replies only; use tests.support.openai_server for faults")


@contextmanager
def serve_latency_process(reply: Reply | None = None) -> Iterator[str]:
    """Serve ``reply`` for every request from a separate process; yields the base URL (``.../v1``)."""
    reply = reply or Reply()
    _check(reply)
    with serve_in_process("tests.support.latency_server", reply) as base_url:
        yield base_url


async def _serve(reply: Reply) -> None:
    sock = _bind()
    sock.listen(2048)
    server = _Server(reply)
    listening = await asyncio.get_running_loop().create_server(lambda: _Connection(server), sock=sock)
    print(sock.getsockname()[1], flush=True)
    async with listening:
        await listening.serve_forever()


def _main(reply_json: str) -> None:
    try:
        import uvloop
    except ImportError:
        runner = asyncio.Runner()
    else:
        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    with runner:
        runner.run(_serve(Reply(**json.loads(reply_json))))


if __name__ == "__main__":
    _main(sys.argv[1])
