"""A real OTLP/HTTP collector for tests: it takes ``POST /v1/traces`` and decodes the protobuf payload.

It speaks the wire format a collector (Jaeger, Tempo, the OpenTelemetry Collector)
speaks: the body is an ``ExportTraceServiceRequest`` in protobuf, decoded here with
``opentelemetry-proto``, and a 200 with an empty ``ExportTraceServiceResponse`` says it
was taken. Each span received is kept as a plain ``ReceivedSpan``, ids in hex, times in
nanoseconds since the epoch, attribute values unwrapped:

    with otlp_receiver() as collector:
        ...  # point OTEL_EXPORTER_OTLP_ENDPOINT at collector.url
        spans = collector.wait_for(12)

``status`` makes it answer every export with that HTTP status instead (a collector that
refuses).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class ReceivedSpan:
    """One span as a collector received it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    """The parent's span id in hex; empty for a root."""
    start_ns: int
    end_ns: int
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    status_code: int
    """0 unset, 1 ok, 2 error (``Status.StatusCode``)."""
    status_message: str
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest`` payload."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(ReceivedSpan(
                    name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(), start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano, kind=span.kind, attributes=_attributes(span.attributes),
                    events=[(e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events],
                    status_code=span.status.code, status_message=span.status.message, resource=resource,
                ))
    return spans


class Collector:
    """What the receiver took: every span, every request's headers, and how it answers.

    It answers as soon as a request's body is read and decodes the body when its spans
    are asked for, as a collector acknowledges a batch it has queued: the sender then
    waits for the network and not for this receiver's Python, which a collector written
    in Go would not make it wait for (it matters to ``benchmarks.tracing_overhead``).
    """

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.url = ""
        self.requests: list[dict[str, str]] = []
        self._bodies: list[bytes] = []
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    def take(self, body: bytes, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(headers)
            self._bodies.append(body)

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, decoded."""
        with self._lock:
            bodies, self._bodies = self._bodies, []
            for body in bodies:
                self._spans.extend(decode(body))
            return list(self._spans)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ReceivedSpan]:
        """The spans received, once there are at least ``count`` (or the timeout has passed)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            spans = self.spans
            if len(spans) >= count:
                return spans
            time.sleep(0.02)
        return self.spans


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            if collector.status == 200:
                collector.take(body, {k.lower(): v for k, v in self.headers.items()})
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(collector.status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    return Handler


@contextmanager
def otlp_receiver(status: int = 200) -> Iterator[Collector]:
    """A collector on a free port of 127.0.0.1, for the block."""
    collector = Collector(status)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(collector))
    collector.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
