"""The wire format of an OpenAI-compatible stream: server-sent events, their JSON chunks,
and the ``Retry-After`` header of a service asking for patience."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait as a ``Retry-After`` header asks, in seconds or as an HTTP date.

    None when the header is absent or unreadable; a date in the past gives 0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event; comments and other fields are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    # An event cut off by the end of the body is dropped, as SSE says, unless it is the end mark.
    if data == ["[DONE]"]:
        yield "[DONE]"


def decode_chunks(data: str) -> list[Any]:
    """The JSON chunks in one event's data; raises ValueError when one is not JSON."""
    try:
        return [json.loads(data)]
    except json.JSONDecodeError:
        if "\n" not in data:
            raise
    # Some servers end each data line with a single newline, which joins several chunks
    # into one event; read them one by one.
    return [json.loads(line) for line in data.split("\n") if line.strip()]
