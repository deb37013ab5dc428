"""Spans of the questions ``docpilot serve`` answers: one trace per turn, its stages under it.

The turn's events pass through ``TurnTracer.traced`` on their way to the client, and
the spans are laid out when the turn ends, from when each event passed and the stage
times the turn reports in its own ``timing`` event: ``embed`` and ``retrieve`` end
where the ranked sources were sent (priming, a fraction of a millisecond, lies between),
``model`` starts there and lasts ``model_ms``, with the first answer text as an event,
and ``render`` runs from the model's end to the citations. Nothing of the question or
the answer is put in a span: a served question is a user's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from docpilot.config.model import TelemetryConfig
from docpilot.telemetry.settings import Tracing, tracing_settings, unusable
from docpilot.telemetry.spans import AttributeValue, PlannedSpan, SpanEvent, ns, parse_traceparent

_log = logging.getLogger("docpilot.server")


@dataclass
class TurnTimes:
    """When a turn's events passed (seconds since the epoch) and what they said."""

    arrived: float
    """When the request arrived."""
    retrieval: float | None = None
    first_token: float | None = None
    citations: float | None = None
    ended: float | None = None
    timing: Any = None
    """The turn's ``timing`` event: embed_ms, retrieve_ms, model_ms, total_ms."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None

    def saw(self, name: str, payload: Any, now: float) -> None:
        """Note one event as it passes."""
        if name == "retrieval":
            self.retrieval = now
        elif name == "token" and self.first_token is None and payload.text.strip():
            self.first_token = now
        elif name == "citations":
            self.citations = now
        elif name == "timing":
            self.timing = payload
        elif name == "refusal":
            self.attributes.update({"docpilot.refused": True, "docpilot.refused_by": payload.refused_by,
                                    "docpilot.refusal_cause": payload.cause})
        elif name == "error":
            self.error = payload.code
            self.attributes["docpilot.error_code"] = payload.code
        elif name == "done":
            if payload.finish_reason is not None:
                self.attributes["docpilot.finish_reason"] = payload.finish_reason
            for key, attribute in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
                if key in payload.usage:
                    self.attributes[f"gen_ai.usage.{attribute}"] = payload.usage[key]


def turn_spans(turn: TurnTimes, *, request_id: str, model: str) -> list[PlannedSpan]:
    """The spans of one served turn, the turn's first."""
    ended = turn.ended if turn.ended is not None else time.time()
    root = PlannedSpan("turn", ns(turn.arrived), ns(ended), kind="server", error=turn.error,
                       attributes={"docpilot.request_id": request_id, "gen_ai.request.model": model,
                                   "openinference.span.kind": "CHAIN", **turn.attributes})
    spans = [root]
    timing = turn.timing
    if turn.retrieval is None or timing is None:
        return spans  # ended before its stages did (a client gone, a failure): the turn alone
    search_end = ns(turn.retrieval)
    search_start = search_end - int(timing.retrieve_ms * 1e6)
    spans.append(PlannedSpan("embed", search_start - int(timing.embed_ms * 1e6), search_start, parent=0,
                             attributes={"openinference.span.kind": "EMBEDDING"}))
    spans.append(PlannedSpan("retrieve", search_start, search_end, parent=0,
                             attributes={"openinference.span.kind": "RETRIEVER"}))
    if turn.attributes.get("docpilot.refused_by") == "gate":
        return spans  # no model ran
    model_end = search_end + int(timing.model_ms * 1e6)
    model_span = PlannedSpan("model", search_end, model_end, parent=0, kind="client", error=turn.error,
                             attributes={"openinference.span.kind": "LLM", "gen_ai.operation.name": "chat",
                                         "gen_ai.request.model": model})
    if turn.first_token is not None:
        model_span.events.append(SpanEvent("first token", min(max(ns(turn.first_token), search_end), model_end)))
    spans.append(model_span)
    if turn.citations is not None:
        spans.append(PlannedSpan("render", model_end, max(ns(turn.citations), model_end), parent=0,
                                 attributes={"openinference.span.kind": "CHAIN"}))
    return spans


def turn_tracer(settings: TelemetryConfig, model: str) -> TurnTracer | None:
    """The server's tracer when tracing is configured and can run; None otherwise (then nothing is imported).

    Configured but unusable (no ``telemetry`` extra, an address that is no URL): one
    warning line, and the server serves untraced.
    """
    tracing = tracing_settings(settings)
    if tracing is None:
        return None
    problem = unusable(tracing)
    if problem is not None:
        _log.warning("%s", problem.removeprefix("warning: "))
        return None
    return TurnTracer(tracing, model)


class TurnTracer:
    """Traces every turn of a server process; ``start`` it in the process that serves, ``stop`` it at the end."""

    def __init__(self, tracing: Tracing, model: str) -> None:
        self.tracing = tracing
        self.model = model
        self._exporter: Any = None

    def start(self) -> None:
        """Open the exporter and its sending thread (in a forked worker: its own)."""
        from docpilot.telemetry.otlp import TurnExporter

        self._exporter = TurnExporter(self.tracing)

    def stop(self) -> None:
        """Send the spans still waiting, for a few seconds at most."""
        exporter, self._exporter = self._exporter, None
        if exporter is not None:
            exporter.close()

    async def traced(self, events: AsyncIterator[Any], *, request_id: str, started: float,
                     parent: str | None = None) -> AsyncIterator[Any]:
        """``events`` as they are, noting when each passed; the turn's spans go out when it ends.

        ``started`` is the request's arrival on the ``time.perf_counter()`` clock. ``parent``
        is the request's ``traceparent`` header: a valid one puts the turn in the caller's
        trace, under the caller's span (an eval's record, with ``--runtime server``); an
        absent or malformed one leaves the turn a trace of its own.
        """
        turn = TurnTimes(arrived=time.time() - (time.perf_counter() - started))
        try:
            async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
                async for name, payload in stream:
                    turn.saw(name, payload, time.time())
                    yield name, payload
        except BaseException as exc:  # a client gone (cancelled), or a bug that the server logs
            turn.error = turn.error or ("cancelled" if not isinstance(exc, Exception) else "internal")
            raise
        finally:
            turn.ended = time.time()
            self._emit(turn, request_id, parse_traceparent(parent))

    def _emit(self, turn: TurnTimes, request_id: str, parent: tuple[int, int] | None) -> None:
        if self._exporter is None:
            return
        try:
            self._exporter.emit(turn_spans(turn, request_id=request_id, model=self.model), parent)
        except Exception:  # noqa: BLE001 - a span that cannot be made must not fail the answer
            _log.warning("request %s: its trace could not be made", request_id, exc_info=True)
