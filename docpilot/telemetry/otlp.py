"""Laid-out spans handed to the OpenTelemetry SDK and sent with its OTLP/HTTP (protobuf) exporter.

The only module of DocPilot that imports OpenTelemetry, inside its functions, and only
once tracing is configured (``docpilot.telemetry.settings``).

An eval's spans go in parts (``Sender``, in the process of ``docpilot.telemetry.outbox``):
each shard's records as the shard is scored, while later shards still wait on the
model, and the run's root at its end, bounded by the configured timeout: a collector
that is down, slow or refusing costs that long at most, and one warning line; the
run's result and exit status do not change. The exporter's own log
lines (a warning per retry) are kept out of the user's terminal: the one line says why.
A server's turns go through the SDK's batch processor instead (``TurnExporter``), which
sends them from a thread of its own while the server answers.
"""

from __future__ import annotations

import logging
import random
import re
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import docpilot
from docpilot.telemetry.settings import Tracing
from docpilot.telemetry.spans import PlannedSpan

_server_log = logging.getLogger("docpilot.server")

CHUNK = 2_000
"""Spans per export request: a large run's trace goes in several requests of bounded size, not one."""


def exporter_of(tracing: Tracing) -> Any:
    """The SDK's OTLP/HTTP protobuf exporter, pointed at the configured collector."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=tracing.url, headers=dict(tracing.headers), timeout=tracing.timeout_s)


class SpanMaker:
    """Turns laid-out spans into the SDK's finished spans (``ReadableSpan``), ids and resource included.

    The spans are made finished, with the times they carry, rather than started and
    ended through a tracer: they describe work that is over, and a tracer's span
    objects cost several times as much to make as ones made directly. So a run is
    traced whole or not at all; ``OTEL_TRACES_SAMPLER`` does not apply.
    """

    def __init__(self, tracing: Tracing) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.resource = Resource.create({"service.name": tracing.service_name,
                                         "service.version": docpilot.__version__})
        self.scope = InstrumentationScope("docpilot", docpilot.__version__)

    def make(self, planned: Sequence[PlannedSpan], *, trace_id: int | None = None, first_id: int | None = None,
             outer: Any = None) -> list[Any]:
        """One finished SDK span per planned one; parents come before children.

        By default the spans are a new trace of their own. A run sends its trace in parts
        (``runs.RunTrace``): ``trace_id`` keeps them in one trace, ``first_id`` gives the
        first span (the run's root) the id its records already point to, and ``outer`` is
        the parent (a ``SpanContext``) of the spans whose ``parent`` is None.
        """
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        kinds = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
        flags = TraceFlags(TraceFlags.SAMPLED)
        trace_id = trace_id or random.getrandbits(128) or 1  # an all-zero id is invalid
        unset, made = Status(StatusCode.UNSET), []
        contexts = [SpanContext(trace_id, plan.span_id or random.getrandbits(64) or 1, False, flags) for plan in planned]
        if first_id is not None and contexts:
            contexts[0] = SpanContext(trace_id, first_id, False, flags)
        for context, plan in zip(contexts, planned, strict=True):
            made.append(ReadableSpan(
                name=plan.name, context=context, parent=outer if plan.parent is None else contexts[plan.parent],
                resource=self.resource, attributes=plan.attributes, kind=kinds[plan.kind],
                events=[Event(e.name, e.attributes, e.at_ns) for e in plan.events],
                status=unset if plan.error is None else Status(StatusCode.ERROR, plan.error),
                start_time=plan.start_ns, end_time=plan.end_ns, instrumentation_scope=self.scope,
            ))
        return made


def root_context(trace_id: int, span_id: int, *, remote: bool = False) -> Any:
    """The ``SpanContext`` of a span known before it is made here: a run's root, or (``remote``) a span of another
    process, such as the eval's record whose question a server answers."""
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(trace_id, span_id, remote, TraceFlags(TraceFlags.SAMPLED))


class Sender:
    """Sends the finished SDK spans of one run, part by part, as they are handed over (in ``outbox``'s process).

    After a part that could not be sent the later ones are dropped: they would only wait
    on the collector again. The exporter's log lines are kept for the one warning
    ``finish`` returns.
    """

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing
        self.maker = SpanMaker(tracing)
        self._exporter = exporter_of(tracing)
        self._heard = _Heard()
        self._heard.listen()
        self._failed = False
        self._count = 0

    def send(self, spans: Sequence[Any]) -> None:
        """Export ``spans`` now, in requests of at most ``CHUNK``."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        self._count += len(spans)
        if self._failed:
            return
        try:
            for first in range(0, len(spans), CHUNK):
                if self._exporter.export(spans[first:first + CHUNK]) is not SpanExportResult.SUCCESS:
                    self._failed = True
                    return
        except Exception as error:  # noqa: BLE001 - tracing must never end the run
            self._heard.messages.append(str(error))
            self._failed = True

    def finish(self) -> tuple[int, str | None]:
        """The spans made, and None or why they were not all sent."""
        self._exporter.shutdown()
        self._heard.stop_listening()
        return self._count, self._heard.reason(self.tracing.url) if self._failed else None


class TurnExporter:
    """A server's spans: each turn's handed over as it ends, sent in batches from a thread of the SDK's.

    A batch that cannot be sent is one warning on the server's log, saying why, instead
    of the exporter's line per retry.
    """

    def __init__(self, tracing: Tracing) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        inner = exporter_of(tracing)
        heard = self._heard = _Heard()
        heard.listen()

        class Reported(SpanExporter):
            def export(self, spans: Sequence[Any]) -> Any:
                result = inner.export(spans)
                if result is not SpanExportResult.SUCCESS:
                    _server_log.warning("%d spans were not sent to %s: %s", len(spans), tracing.url, heard.reason(tracing.url))
                heard.messages.clear()
                return result

            def shutdown(self) -> None:
                inner.shutdown()

        self._processor = BatchSpanProcessor(Reported())
        self._maker = SpanMaker(tracing)

    def emit(self, planned: Sequence[PlannedSpan], parent: tuple[int, int] | None = None) -> None:
        """Hand one turn's spans over; the batch processor sends them a little later.

        ``parent`` (trace id, span id), from the request's ``traceparent``, puts the turn in
        the caller's trace, under its span; without it the turn is a trace of its own.
        """
        made = self._maker.make(planned) if parent is None else \
            self._maker.make(planned, trace_id=parent[0], outer=root_context(*parent, remote=True))
        for span in made:
            self._processor.on_end(span)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is left, waiting at most ``timeout_s`` (and the exporter's own timeout)."""
        self._processor.force_flush(int(timeout_s * 1000))
        self._processor.shutdown()
        self._heard.stop_listening()


class _Heard(logging.Handler):
    """The exporter's log lines, kept for the one warning instead of printed one by one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())

    def listen(self) -> None:
        """From now on the ``opentelemetry`` loggers' lines come here and go no further."""
        logger = logging.getLogger("opentelemetry")
        self._propagate = logger.propagate
        logger.addHandler(self)
        logger.propagate = False

    def stop_listening(self) -> None:
        """Let the ``opentelemetry`` loggers' lines go where they went before."""
        logger = logging.getLogger("opentelemetry")
        logger.removeHandler(self)
        logger.propagate = self._propagate

    def reason(self, url: str) -> str:
        """Why the export to ``url`` failed, in a few words: the collector's answer, else what a connection finds.

        The exporter names a refusal only when it has time left to retry, so when it said
        no status, one connection attempt (half a second at most) tells a collector that
        is down from one that does not resolve or does not answer.
        """
        said = " ".join(self.messages)
        status = re.search(r"code: (\d{3}), reason: ([^\n]{0,80})", said)
        if status:
            return f"the collector answered HTTP {status.group(1)} ({status.group(2).strip()})"
        parts = urlsplit(url)
        try:
            with socket.create_connection((parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)),
                                          timeout=0.5):
                pass
        except ConnectionRefusedError:
            return "nothing accepts connections there (connection refused)"
        except socket.gaierror:
            return f"the host name {parts.hostname!r} does not resolve"
        except OSError as error:
            return f"it cannot be reached ({error.strerror or type(error).__name__})"
        return "the collector did not answer in time"
