"""A span as DocPilot lays it out before OpenTelemetry sees it: plain data, times already known.

Spans are made after the fact, from times a run or a turn recorded anyway, so each one
is written down whole (name, start, end, parent, attributes, events) and handed to
``docpilot.telemetry.otlp`` in a list where a parent always comes before its children.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

AttributeValue = str | bool | int | float | list[str]
"""What an attribute may hold here (OpenTelemetry takes these, and lists of them)."""


@dataclass(slots=True)
class SpanEvent:
    """Something that happened at one moment inside a span, such as the model's first token."""

    name: str
    at_ns: int
    """When, in nanoseconds since the Unix epoch."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


@dataclass(slots=True)
class PlannedSpan:
    """One span, whole: what it is, when it started and ended, and where it sits in its trace."""

    name: str
    start_ns: int
    """Nanoseconds since the Unix epoch."""
    end_ns: int
    parent: int | None = None
    """The position of its parent in the same list; None for the trace's root."""
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """Set when the work the span stands for failed: its status is then an error with this description."""
    kind: Literal["internal", "server", "client"] = "internal"
    span_id: int | None = None
    """A span id fixed ahead (``derived_id``), for a span something outside the trace names before it is
    made: an eval's record span, which the server of ``--runtime server`` makes the parent of its turn."""


def derived_id(trace_id: int, *names: str) -> int:
    """A span id worked out from the trace and names (a record's id): the same wherever it is worked out, never 0."""
    digest = hashlib.sha256(":".join([f"{trace_id:032x}", *names]).encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def traceparent(trace_id: int, span_id: int) -> str:
    """The W3C Trace Context header naming a span as the parent of work done elsewhere (sampled)."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def parse_traceparent(header: str | None) -> tuple[int, int] | None:
    """The (trace id, parent span id) of a W3C ``traceparent`` header; None when it is absent or invalid."""
    found = _TRACEPARENT.fullmatch((header or "").strip().lower())
    if found is None or found.group(1) == "ff":
        return None
    trace_id, span_id = int(found.group(2), 16), int(found.group(3), 16)
    return (trace_id, span_id) if trace_id and span_id else None


def ns(seconds: float) -> int:
    """Seconds since the epoch (``time.time()``) as the integer nanoseconds spans carry."""
    return int(seconds * 1e9)
