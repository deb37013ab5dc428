"""The HTTP connection limits uvicorn leaves out: deadlines and a size for requests, and a connection cap.

Without them a client needs no token to take the server down: connections that send
half a request line, or headers and then a body one byte a second, stay open for ever
until the connection cap or the file limit turns everyone else away, and headers are
buffered without bound. ``guarded_protocol`` returns uvicorn's httptools protocol
with four rules added:

- the request line and headers must arrive within ``header_timeout_s`` of the
  connection opening (or of the next request's first byte on a kept-alive one);
- the whole request, its body too, must arrive within ``request_timeout_s`` of the
  same moment; a client late for either gets ``408`` and the connection is closed
  (only closed, when the app has already begun its answer);
- the line and headers may take at most ``max_header_bytes``, counted as bytes
  arrive; more is ``431``. A body is never counted here, even when the client
  writes it in one piece with the headers: the parser is handed no more than the
  headers may still take, and what follows their end goes on as the body, which the
  app holds to its own limit (``413``);
- at most ``max_connections`` are open; one more closes the connection whose request
  has been arriving longest (headers or body), so a flood of slow clients cannot keep
  out a client that speaks promptly (``/healthz`` stays reachable), and when every
  connection has sent its request the new one is answered ``503`` and closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_HEADER_TIMEOUT_S = 10.0
"""Longest time a client may take to send its request line and headers."""
DEFAULT_REQUEST_TIMEOUT_S = 20.0
"""Longest time a client may take to send its whole request: line, headers and body."""
DEFAULT_MAX_HEADER_BYTES = 32 * 1024
"""Largest request line plus headers accepted; more is answered 431."""
DEFAULT_MAX_CONNECTIONS = 4096
"""Most connections open at once (over all workers), kept below the file limit."""

_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Limits:
    """The connection limits of one serving process."""

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S


def refusal(status: int, code: str, message: str) -> bytes:
    """A complete HTTP response that closes the connection, with the server's JSON error body."""
    body = json.dumps({"error": {"code": code, "message": message, "request_id": None}}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def guarded_protocol(limits: Limits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``limits`` enforced on every connection."""

    class Guarded(_GuardedProtocol):
        LIMITS = limits

    return Guarded


class _GuardedProtocol(HttpToolsProtocol):
    LIMITS = Limits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self._in_body = False  # the current request's headers are in, its body is not
        self._header_bytes = 0
        self._since = time.monotonic()
        self._start_headers()
        if len(self.connections) > self.LIMITS.max_connections and not self._shed_oldest():
            self._refuse(503, "too_many_connections", "the server has too many open connections; retry shortly")

    def _shed_oldest(self) -> bool:
        """Close the connection whose request has been arriving longest; False when every request has arrived."""
        waiting = [c for c in self.connections if c is not self and getattr(c, "_request_timer", None) is not None]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c._since)
        oldest._refuse(408, "request_timeout", "the request did not arrive in time")
        return True

    def _start_headers(self) -> None:
        self._header_bytes = 0
        self._in_body = False
        self._since = time.monotonic()
        self._header_timer = self.loop.call_later(self.LIMITS.header_timeout_s, self._headers_late)
        self._request_timer = self.loop.call_later(self.LIMITS.request_timeout_s, self._request_late)

    def _stop_headers(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _stop_request(self) -> None:
        self._stop_headers()
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        limit = self.LIMITS.header_timeout_s
        self._refuse(408, "request_timeout", f"the request headers did not arrive within {limit:g} s")

    def _request_late(self) -> None:
        self._request_timer = None
        limit = self.LIMITS.request_timeout_s
        self._refuse(408, "request_timeout", f"the request and its body did not arrive within {limit:g} s")

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._stop_request()
        if not self.transport.is_closing():
            if not self._answer_begun():
                self.transport.write(refusal(status, code, message))
            # else the app has begun its own answer (a 401 to a body still arriving, say): a
            # second response would garble it, so the connection is only closed.
            self.transport.close()

    def _answer_begun(self) -> bool:
        """Whether the app has begun to answer the request whose body is still arriving."""
        return self._in_body and self.cycle is not None and self.cycle.response_started

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self._request_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._start_headers()  # the first byte of the next request on a kept-alive connection
        if self._header_timer is None:
            super().data_received(data)
            return
        # The parser says where the headers end: it is given what they may still take, and
        # only once they have ended, the rest. A 100 kB body written with its headers in one
        # piece is thus the app's to refuse (413), not a header over its limit (431).
        room = self.LIMITS.max_header_bytes - self._header_bytes
        head, rest = data[:room], data[room:]
        self._header_bytes += len(head)
        if head:
            super().data_received(head)
        if not rest or self.transport.is_closing():
            return
        if self._header_timer is not None:  # the headers run on past the limit
            limit = self.LIMITS.max_header_bytes
            self._refuse(431, "headers_too_large", f"the request line and headers are over {limit} bytes")
        elif not self.parser.should_upgrade():  # an upgrade takes the connection: uvicorn reads no more of it
            super().data_received(rest)

    def on_headers_complete(self) -> None:
        self._stop_headers()
        self._in_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_request()  # the body is in: what follows is the app's time, not the client's
        self._in_body = False
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_request()
        super().connection_lost(exc)
