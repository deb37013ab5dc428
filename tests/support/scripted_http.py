"""An HTTP/1.1 server on 127.0.0.1 that answers each request as a test scripts it, byte for byte.

A client's tests need replies no well-behaved framework sends: a kept-alive connection
closed just as it is reused, a body cut before its end, a stream sent a byte at a time.
``scripted(reply)`` serves, in a thread, a real socket whose every request is answered by
``reply(n, request)``: n counts requests from 1, ``request`` holds the method, path,
headers and body. The reply is a ``Reply`` (its body whole, or in ``pieces`` sent as
chunks, each flushed with an optional pause) or ``DROP`` (the connection is closed with
no reply).

    with scripted(lambda n, request: DROP if n == 1 else Reply(200, body=b"ok")) as url:
        ...
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    """One request as it arrived."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes
    peer: str = ""
    """The client's address and port: requests of one kept-alive connection share it."""


@dataclass(frozen=True)
class Reply:
    """What the server sends back: ``body`` whole, or ``pieces`` as chunks (``cut``: the chunked body never ends)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    pieces: Sequence[bytes] | None = None
    pause_s: float = 0.0
    """Wait between two pieces."""
    cut: bool = False
    """Close the connection after the pieces, without the chunked body's end."""


DROP = object()
"""Close the connection without a reply."""

_REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}


async def _read_request(reader: asyncio.StreamReader, peer: str) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    first, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = first.split(" ", 2)
    headers = {}
    for line in lines:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body, peer)


async def _send(writer: asyncio.StreamWriter, reply: Reply) -> bool:
    """Write the reply; whether the connection may serve another request."""
    head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
    head += [f"{name}: {value}" for name, value in reply.headers.items()]
    if reply.pieces is None:
        head.append(f"content-length: {len(reply.body)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + reply.body)
        await writer.drain()
        return True
    head.append("transfer-encoding: chunked")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    for piece in reply.pieces:
        writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await writer.drain()
        if reply.pause_s:
            await asyncio.sleep(reply.pause_s)
    if reply.cut:
        return False
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


@contextmanager
def scripted(reply: Callable[[int, Request], Reply | object]) -> Iterator[str]:
    """Serve ``reply`` on a free port of 127.0.0.1 until the block ends; yields the base URL."""
    loop = asyncio.new_event_loop()
    count = 0
    started = threading.Event()
    holder: dict[str, object] = {}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        host, port = writer.get_extra_info("peername")[:2]
        try:
            while (request := await _read_request(reader, f"{host}:{port}")) is not None:
                count += 1
                answer = reply(count, request)
                if answer is DROP or not await _send(writer, answer):  # type: ignore[arg-type]
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        holder["server"] = server
        holder["port"] = server.sockets[0].getsockname()[1]
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        asyncio.set_event_loop(loop)
        task = loop.create_task(main())
        holder["task"] = task
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(holder["task"].cancel)  # type: ignore[attr-defined]
        thread.join(10)
