"""A run's errored records grouped by cause, so a reader sees what went wrong before the numbers.

One fault (a wrong key, a server that cuts turns short, a timeout) usually fails many
records in the same way; printed one by one they would bury the scorecard. Records are
grouped by their error code (``Row.error_code``), never by the wording of the message.
Each group gives the cause in a few words, how many records it hit, and the first
record's whole message, which carries the service's reason (an HTTP status, say) and
the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from docpilot.schema import Row

# What each error code says in a few words (``docpilot.schema.ErrorCode``).
_CAUSES: dict[str, str] = {
    "unfinished": "the service ended turns without finishing them (no finish_reason)",
    "empty": "finished turns with no answer text",
    "timeout": "no complete reply in time",
    "connect": "the service could not be reached",
    "auth": "the service refused the credentials (HTTP 401 or 403)",
    "rate_limit": "the service kept rate limiting (HTTP 429)",
    "http_status": "HTTP errors from the service",
    "malformed": "malformed replies",
    "incomplete": "streams cut short",
    "service_error": "errors the service reported",
    "reply_too_long": "replies longer than the size cap",
    "reply_too_large": "target replies past their byte or source cap",
}


@dataclass(frozen=True)
class FaultGroup:
    """Errored records that share a cause."""

    cause: str
    """The cause in a few words."""
    count: int
    """How many records it hit."""
    first_record: str
    """The id of the first such record, in row order."""
    first_message: str
    """That record's error, whole."""


def fault_cause(row: Row) -> str:
    """The cause of one errored row, in a few words: what records are grouped by.

    The row's error code decides. A row without one (a report written before rows
    carried codes) is named by its message's first clause, which names the fault
    without the record's details.
    """
    if row.error_code is not None:
        return _CAUSES.get(row.error_code, row.error_code)
    message = row.error or ""
    head = re.split(r"[;:(]", message, maxsplit=1)[0].strip()
    return head[:80] or "unknown fault"


def group_faults(rows: Sequence[Row]) -> list[FaultGroup]:
    """The errored rows grouped by cause, the largest group first (ties in order of first appearance)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row.error is not None:
            groups.setdefault(fault_cause(row), []).append(row)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))  # sorted() is stable
    return [
        FaultGroup(cause=cause, count=len(members), first_record=members[0].id, first_message=members[0].error or "")
        for cause, members in ordered
    ]
