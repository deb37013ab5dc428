"""A span as DocPilot lays it out before OpenTelemetry sees it: plain data, times already known.

Spans are made after the fact, from times a run or a turn recorded anyway, so each one
is written down whole (name, start, end, parent, attributes, events) and handed to
``docpilot.telemetry.otlp`` in a list where a parent always comes before its children.
"""

from __future__ import annotations

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


def ns(seconds: float) -> int:
    """Seconds since the epoch (``time.time()``) as the integer nanoseconds spans carry."""
    return int(seconds * 1e9)
