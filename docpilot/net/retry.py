"""When to ask a service again: the one retry policy every HTTP client of DocPilot follows.

A service that answers 429 or 5xx (a DocPilot server: 503), or whose connection
drops, is asked again after a wait that doubles with each attempt, with jitter so that
many turns that failed together do not retry in step, unless it said how long to wait
in a ``Retry-After`` header (seconds or an HTTP date), which is obeyed up to a cap.
``RetryPolicy`` holds those numbers; the openai model, the embeddings client and
DocPilot's API client each ask it for their waits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
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
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable


@dataclass(frozen=True)
class RetryPolicy:
    """How often to ask again, and how long to wait before each attempt."""

    retries: int = 3
    """Attempts after the first; 0 asks once."""
    backoff_base_s: float = 0.5
    """The wait before the first retry when the service named none; it doubles with each attempt."""
    backoff_cap_s: float = 8.0
    """The longest wait the doubling reaches."""
    retry_after_cap_s: float = RETRY_AFTER_CAP_S
    """The longest ``Retry-After`` obeyed; a longer one is cut to this."""
    jitter: bool = True
    """Wait a random 50–100 % of the backoff, so that turns that failed together spread out."""

    def gives_up(self, attempt: int) -> bool:
        """Whether attempt ``attempt`` (0 for the first) was the last one allowed."""
        return attempt >= self.retries

    def wait_s(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after attempt ``attempt`` failed: the service's ``Retry-After`` if it gave one, else the backoff."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap_s)
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)
        return ceiling * random.uniform(0.5, 1.0) if self.jitter else ceiling
