"""When to ask a service again: the one retry policy every HTTP client of DocPilot follows.

A service that answers 429 or 5xx, or whose connection drops, is asked again after a
wait that grows with each attempt, unless it said how long to wait in a ``Retry-After``
header (seconds or an HTTP date), which is obeyed up to ``RETRY_AFTER_CAP_S``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

RETRY_AFTER_CAP_S = 30.0
"""The longest wait a ``Retry-After`` header is obeyed for; a longer one is cut to this."""


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


def retry_wait_s(value: str | None, *, default: float, now: datetime | None = None) -> float:
    """How long to wait before asking again: the ``Retry-After`` header's wait, at most
    ``RETRY_AFTER_CAP_S``, else ``default`` when the header is absent or unreadable."""
    seconds = parse_retry_after(value, now=now)
    return default if seconds is None else min(seconds, RETRY_AFTER_CAP_S)
