"""The server against hostile clients: half-open and oversized requests, floods, other sites, odd bodies.

Real uvicorn servers on 127.0.0.1 and raw sockets; no part of the HTTP stack is faked.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from contextlib import closing

import httpx
import pytest

from docpilot.models.registry import build_model
from docpilot.server.app import create_app, serve_in_thread
from docpilot.server.guards import host_is_local, origin_is_local
from docpilot.server.protocol import Limits
from tests.docpilot.server.test_server import ANSWERABLE, ScriptedModel, _workspace

pytestmark = pytest.mark.slow

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def workspace():
    return _workspace()


def _app(workspace, model=None, **options):
    options.setdefault("token", None)
    return create_app(workspace, model or build_model(workspace.config.model, corpus=workspace.corpus), **options)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


# Regression: connections that sent half a request line were held for ever.
def test_headers_that_never_finish_get_408_and_the_connection_closes(workspace):
    with serve_in_thread(_app(workspace), limits=Limits(header_timeout_s=0.3)) as url:
        with closing(_connect(url)) as sock:
            sock.sendall(b"POST /v1/ask HT")
            reply = _read_all(sock)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in reply


def test_a_silent_connection_is_closed_too(workspace):
    with serve_in_thread(_app(workspace), limits=Limits(header_timeout_s=0.3)) as url:
        with closing(_connect(url)) as sock:
            assert _read_all(sock).startswith(b"HTTP/1.1 408 ")


# Regression: a 1 MB header was answered 200, and 320 MB grew the server by 300 MB.
def test_headers_over_the_limit_are_431(workspace):
    with serve_in_thread(_app(workspace), limits=Limits(max_header_bytes=8192)) as url:
        with closing(_connect(url)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
            reply = _read_all(sock)
        assert reply.startswith(b"HTTP/1.1 431 ") and b"headers_too_large" in reply
        assert httpx.get(f"{url}/healthz").status_code == 200  # ordinary headers still pass


def test_a_kept_alive_connection_gets_a_header_deadline_per_request(workspace):
    with serve_in_thread(_app(workspace), limits=Limits(header_timeout_s=0.3)) as url:
        with closing(_connect(url)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = sock.recv(65536)
            assert first.startswith(b"HTTP/1.1 200 ")
            sock.sendall(b"GET /heal")  # the next request starts and stalls
            assert _read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_at_the_connection_cap_the_longest_waiting_half_open_connection_makes_room(workspace):
    with serve_in_thread(_app(workspace), limits=Limits(max_connections=4, header_timeout_s=60)) as url:
        stalled = [_connect(url) for _ in range(4)]
        try:
            for sock in stalled:
                sock.sendall(b"GET /hea")
            # The cap is full of half-open connections; a prompt client is still answered.
            with httpx.Client() as client:
                assert client.get(f"{url}/healthz", headers={"Connection": "close"}).status_code == 200
            assert _read_all(stalled[0]).startswith(b"HTTP/1.1 408 ")
        finally:
            for sock in stalled:
                sock.close()


TOKEN = "hardening-token-0123456789"
_SLOW_HEAD = (
    "POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    f"Authorization: Bearer {TOKEN}\r\nContent-Length: 200\r\n\r\n"
).encode()


def _trickle(sock: socket.socket, stop: threading.Event, every_s: float = 1.0) -> None:
    """Send a body one byte every ``every_s``, until told to stop or the server closes the connection."""
    while not stop.is_set():
        try:
            sock.sendall(b" ")
        except OSError:
            return
        stop.wait(every_s)


# Regression: a client that sent its headers and then its body a byte a second stayed
# connected as long as it kept sending: the deadline ended with the headers.
def test_a_body_sent_a_byte_a_second_is_cut_at_the_request_deadline(workspace):
    limits = Limits(header_timeout_s=10, request_timeout_s=2.5)
    with serve_in_thread(_app(workspace, token=TOKEN), limits=limits) as url, closing(_connect(url)) as sock:
        sock.settimeout(10)
        stop = threading.Event()
        sender = threading.Thread(target=_trickle, args=(sock, stop), daemon=True)
        opened = time.monotonic()
        sock.sendall(_SLOW_HEAD)
        sender.start()
        try:
            reply = _read_all(sock)
        finally:
            stop.set()
            sender.join(5)
        took = time.monotonic() - opened
    assert reply.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in reply and b"2.5 s" in reply
    assert 2.4 <= took < 4.0


# Regression: connections sending their body slowly were never shed, so enough of them
# filled the connection cap and every new client got 503.
def test_slow_bodies_neither_keep_out_a_prompt_client_nor_fill_the_cap(workspace):
    limits = Limits(max_connections=4, header_timeout_s=60, request_timeout_s=60)
    stop = threading.Event()
    slow: list[socket.socket] = []
    with serve_in_thread(_app(workspace, token=TOKEN), limits=limits) as url:
        try:
            for _ in range(3):
                slow.append(_connect(url))
                slow[-1].sendall(_SLOW_HEAD + b'{"question": ')
                threading.Thread(target=_trickle, args=(slow[-1], stop, 0.2), daemon=True).start()
            body = {"question": ANSWERABLE, "stream": False}
            headers = {"Authorization": f"Bearer {TOKEN}", "Connection": "close"}
            # Three slow bodies open: a question from a prompt client is answered.
            assert httpx.post(f"{url}/v1/ask", json=body, headers=headers, timeout=30).status_code == 200
            slow.append(_connect(url))
            slow[-1].sendall(_SLOW_HEAD + b'{"question": ')
            time.sleep(0.2)  # the fourth fills the cap
            # The cap is full of slow bodies: the one arriving longest makes room.
            assert httpx.get(f"{url}/healthz", headers={"Connection": "close"}, timeout=30).status_code == 200
            slow[0].settimeout(10)
            assert _read_all(slow[0]).startswith(b"HTTP/1.1 408 ")
        finally:
            stop.set()
            for sock in slow:
                sock.close()


def test_the_default_request_deadline_is_well_under_a_minute():
    assert Limits().header_timeout_s <= Limits().request_timeout_s <= 30


# Regression: a text/plain POST with a foreign Origin and Host was answered 200.
@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
        ({}, 415, "unsupported_media_type"),
        ({**JSON, "Host": "evil.example"}, 403, "host_not_allowed"),
        ({**JSON, "Host": "rebound.example:8000"}, 403, "host_not_allowed"),
        ({**JSON, "Origin": "https://evil.example"}, 403, "origin_not_allowed"),
        ({**JSON, "Origin": "null"}, 403, "origin_not_allowed"),
    ],
)
def test_cross_site_requests_are_refused(workspace, headers, status, code):
    body = json.dumps({"question": ANSWERABLE, "stream": False})
    with serve_in_thread(_app(workspace)) as url:
        response = httpx.post(f"{url}/v1/ask", content=body, headers=headers)
    assert response.status_code == status and response.json()["error"]["code"] == code


def test_local_pages_and_json_pass(workspace):
    with serve_in_thread(_app(workspace)) as url:
        port = url.rsplit(":", 1)[1]
        headers = {"Origin": f"http://localhost:{port}", "Content-Type": "application/json; charset=utf-8"}
        body = json.dumps({"question": ANSWERABLE, "stream": False})
        assert httpx.post(f"{url}/v1/ask", content=body, headers=headers).status_code == 200


def test_a_public_server_does_not_check_host(workspace):
    with serve_in_thread(_app(workspace, local=False)) as url:
        response = httpx.post(f"{url}/v1/ask", json={"question": ANSWERABLE}, headers={"Host": "docs.example.com"})
    assert response.status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost", "[::1]:80", "LOCALHOST:1"])
def test_local_hosts(host):
    assert host_is_local(host)


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "", "[::1", "10.0.0.1:80"])
def test_foreign_hosts(host):
    assert not host_is_local(host)


def test_origins():
    assert origin_is_local("http://127.0.0.1:8000") and origin_is_local("http://[::1]:3000")
    assert not origin_is_local("https://evil.example") and not origin_is_local("file://")


# Regression: a deeply nested body raised RecursionError: a 500.
def test_a_deeply_nested_body_is_422(workspace):
    body = "[" * 15_000 + "]" * 15_000
    with serve_in_thread(_app(workspace, max_body_bytes=64_000)) as url:
        response = httpx.post(f"{url}/v1/ask", content=body, headers=JSON)
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_json"


def _post_in_one_write(url: str, body: bytes, *, chunked: bool = False) -> tuple[int, dict]:
    """POST /v1/ask with the request line, headers and whole body in one write; the status and JSON reply."""
    head = b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if chunked:
        request = head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    else:
        request = head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    with closing(_connect(url)) as sock:
        with contextlib.suppress(OSError):  # the server may answer before it has read the whole body
            sock.sendall(request)
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
        lines, _, content = reply.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", lines, re.IGNORECASE).group(1))
        while len(content) < length and (chunk := sock.recv(65536)):
            content += chunk
    return int(lines.split()[1]), json.loads(content)


HOSTILE_BODIES = {
    "100,000 open brackets": b"[" * 100_000,
    "a question nested 100,000 deep": b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "a plain 100 kB question": json.dumps({"question": "x" * 100_000}).encode(),
}


# Regression: a body over the limit written in one piece with its headers was answered 431
# "request line and headers are over 32768 bytes": its bytes were counted as headers.
def test_a_body_over_the_limit_is_413_whatever_its_shape_and_however_it_is_sent(workspace):
    with serve_in_thread(_app(workspace)) as url:
        replies = {}
        for name, body in HOSTILE_BODIES.items():
            replies[name, "one write"] = _post_in_one_write(url, body)
            replies[name, "one write, chunked"] = _post_in_one_write(url, body, chunked=True)
            response = httpx.post(f"{url}/v1/ask", content=body, headers=JSON)
            replies[name, "httpx"] = response.status_code, response.json()
        assert httpx.get(f"{url}/healthz").status_code == 200
    wrong = {case: (status, reply["error"]["code"]) for case, (status, reply) in replies.items()
             if (status, reply["error"]["code"]) != (413, "body_too_large")}
    assert wrong == {}


def test_headers_and_a_body_in_one_write_are_within_their_own_limits(workspace):
    # 30 kB of headers and a body in one write: neither is over its limit, so the question is answered.
    body = json.dumps({"question": "How do I install it?", "stream": False}).encode()
    with serve_in_thread(_app(workspace)) as url:
        with closing(_connect(url)) as sock:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"X-Pad: " + b"a" * 30_000 + b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("body, code", [
    (b'{"question": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "invalid_json"),  # past json's recursion limit
    (b'{"question": ' + b"[" * 900 + b"]" * 900 + b"}", "invalid_request"),  # within it: a list, not a string
    (b'{"question": "hi", "scope": ' + b"[" * 900 + b"]" * 900 + b"}", "invalid_request"),
])
def test_a_small_but_deeply_nested_question_is_422(workspace, body, code):
    with serve_in_thread(_app(workspace)) as url:
        status, reply = _post_in_one_write(url, body)
    assert (status, reply["error"]["code"]) == (422, code)


# Regression: a 405 had no Allow header.
def test_a_wrong_method_is_405_with_allow(workspace):
    with serve_in_thread(_app(workspace)) as url:
        response = httpx.get(f"{url}/v1/ask")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


# Regression: with one slot, a sequential keep-alive client got 9-93 % 503s: the slot
# was freed only when the connection's next request arrived.
def test_a_sequential_keep_alive_client_on_one_slot_is_never_turned_away(workspace):
    with serve_in_thread(_app(workspace, max_concurrency=1, queue_depth=0)) as url, httpx.Client() as client:
        statuses = []
        for _ in range(100):
            with client.stream("POST", f"{url}/v1/ask", json={"question": ANSWERABLE}) as response:
                response.read()
                statuses.append(response.status_code)
    assert statuses == [200] * 100


class OrderedModel(ScriptedModel):
    """A scripted model that notes the order in which turns reach it."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.order: list[str] = []

    async def stream(self, prompt):
        self.order.append(prompt.question)
        async for piece in super().stream(prompt):
            yield piece


def test_questions_past_the_slots_wait_in_arrival_order_and_past_the_queue_get_503(workspace):
    hold = threading.Event()
    model = OrderedModel(hold=hold)
    app = _app(workspace, model, max_concurrency=1, queue_depth=2)
    with serve_in_thread(app) as url, httpx.Client() as probe:

        def ask(n: int) -> None:
            with httpx.Client(timeout=30) as client:
                body = {"question": f"{ANSWERABLE} ({n})", "stream": False}
                assert client.post(f"{url}/v1/ask", json=body).status_code == 200

        threads = []
        for n in range(3):  # one in flight, two waiting
            threads.append(threading.Thread(target=ask, args=(n,)))
            threads[-1].start()
            while app.state.slots.in_flight + app.state.slots.waiting < n + 1:
                threading.Event().wait(0.01)  # until this one is in line: the order is the arrival order
        busy = probe.post(f"{url}/v1/ask", json={"question": ANSWERABLE})
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        hold.set()
        for thread in threads:
            thread.join(30)
    assert model.order == [f"{ANSWERABLE} ({n})" for n in range(3)]  # the model saw them as they arrived


class BlockingModel:
    """A model that holds its thread, as CPU-bound Python does, until released."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()

    async def complete(self, prompt):
        from docpilot.models.base import Turn

        self.started.set()
        self.release.wait(30)  # no await: the loop it runs on cannot serve anyone meanwhile
        return Turn(answer="Install Acme with pip [1].", latency_ms=0.0)


def test_a_turn_that_holds_its_thread_does_not_stop_healthz(workspace):
    model = BlockingModel()
    with serve_in_thread(_app(workspace, model)) as url, httpx.Client(timeout=30) as client:
        answer = threading.Thread(target=lambda: client.post(f"{url}/v1/ask", json={"question": ANSWERABLE}))
        answer.start()
        try:
            assert model.started.wait(30)
            # Had the turn run on the connections' loop, this would wait for the release.
            assert httpx.get(f"{url}/healthz", timeout=30).json()["in_flight"] == 1
        finally:
            model.release.set()
            answer.join(30)


def test_a_reverse_proxys_name_can_be_allowed(workspace):
    app = _app(workspace, allowed_hosts=frozenset({"docs.example.com"}))
    with serve_in_thread(app) as url:
        body = {"question": ANSWERABLE, "stream": False}
        allowed = httpx.post(f"{url}/v1/ask", json=body, headers={"Host": "docs.example.com"})
        other = httpx.post(f"{url}/v1/ask", json=body, headers={"Host": "evil.example"})
    assert allowed.status_code == 200 and other.status_code == 403
    assert "--allow-host" in other.json()["error"]["message"]


def test_a_waiter_that_gives_up_leaves_the_line_and_the_count_right():
    import asyncio

    from docpilot.server.admission import Slots

    async def run() -> tuple[int, int]:
        slots = Slots(1, queue_depth=2)
        assert await slots.take()
        first = asyncio.create_task(slots.take())
        second = asyncio.create_task(slots.take())
        await asyncio.sleep(0)
        assert slots.waiting == 2
        assert await slots.take() is False  # the line is full: refused at once
        first.cancel()  # a client that went away while waiting
        await asyncio.gather(first, return_exceptions=True)
        slots.give_back()  # the slot goes to the one still waiting
        assert await second
        slots.give_back()
        return slots.in_flight, slots.waiting

    assert asyncio.run(run()) == (0, 0)
