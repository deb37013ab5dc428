"""A run's errored records grouped by cause, so a reader sees what went wrong before the numbers.

One fault (a wrong key, a server that cuts turns short, a timeout) usually fails many
records in the same way; printed one by one they would bury the scorecard. Each group
gives the cause in a few words, how many records it hit, and the first record's whole
message, which carries the service's reason and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from docpilot.schema import Row

# Checked in order; the first that matches names the cause. The texts are those the
# openai model, the server and the remote client write (docpilot/models, docpilot/run).
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"no finish_reason"), "the service ended turns without finishing them (no finish_reason)"),
    (re.compile(r"with no answer text and no refusal|before any answer text"), "finished turns with no answer text"),
    (re.compile(r"timeout|within \S+ s\b|did not finish within"), "no complete reply in time"),
    (re.compile(r"cannot get a reply|no reply from|cannot connect"), "the service could not be reached"),
    (re.compile(r"malformed|not a JSON object|cannot read the JSON"), "malformed replies"),
    (re.compile(r"stream ended before|before its `done`|closed the stream early"), "streams cut short"),
    (re.compile(r"reported an error"), "errors the service reported"),
)
_STATUS = re.compile(r"\bHTTP (\d{3})\b")


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


def fault_cause(message: str) -> str:
    """The cause of one error message, in a few words: what records are grouped by."""
    status = _STATUS.search(message)
    if status is not None:
        return f"HTTP {status.group(1)} from the service"
    for pattern, cause in _CAUSES:
        if pattern.search(message):
            return cause
    # An unknown fault: its first clause, which names it without the record's details.
    head = re.split(r"[;:(]", message, maxsplit=1)[0].strip()
    return head[:80] or "unknown fault"


def group_faults(rows: Sequence[Row]) -> list[FaultGroup]:
    """The errored rows grouped by cause, the largest group first (ties in order of first appearance)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row.error is not None:
            groups.setdefault(fault_cause(row.error), []).append(row)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))  # sorted() is stable
    return [
        FaultGroup(cause=cause, count=len(members), first_record=members[0].id, first_message=members[0].error or "")
        for cause, members in ordered
    ]
