"""A real OpenAI-compatible ``POST /v1/embeddings`` server on 127.0.0.1 that counts what it is asked.

Each text gets a deterministic vector of its own (seeded by its hash), so rankings are
stable from run to run; every request body is kept, so a test can count how often a
text was embedded.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def text_vector(text: str, dim: int) -> list[float]:
    """The vector the server gives a text: normal noise seeded by the text's hash."""
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return [float(v) for v in np.random.default_rng(seed).normal(size=dim)]


@dataclass
class EmbeddingsLog:
    """What the server was asked, request by request."""

    dim: int = 8
    bodies: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inputs(self) -> Counter:
        """How many times each text was sent to be embedded."""
        with self._lock:
            return Counter(text for body in self.bodies for text in body["input"])


@contextmanager
def serve_embeddings(log: EmbeddingsLog) -> Iterator[str]:
    """Serve ``/v1/embeddings`` on a free loopback port in a thread; yields the base URL (``…/v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # the test output stays clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "test"}})
                return
            with log._lock:
                log.bodies.append(body)
            dim = body.get("dimensions") or log.dim
            data = [{"object": "embedding", "index": i, "embedding": text_vector(text, dim)}
                    for i, text in enumerate(body["input"])]
            self._send(200, {"object": "list", "data": data, "model": body.get("model")})

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
