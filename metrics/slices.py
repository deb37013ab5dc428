"""Slices: one summary per tag, over the rows that carry it.

A slice is computed by ``summarize`` itself on the tag's rows, so it holds exactly
the numbers a run of those records alone (``docpilot eval --tag TAG``) reports.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.metrics.summary import Ahead, summarize

from docpilot.schema import Row, Slice


def slice_by_tag(rows: Sequence[Row], *, gate_only: bool = False, ahead: Ahead | None = None) -> dict[str, Slice]:
    """Tag → the summary of the rows carrying it; tags sorted, rows in report order (``ahead``: see ``summarize``)."""
    tags = sorted({tag for row in rows for tag in row.tags})
    slices = {}
    for tag in tags:
        members = [row for row in rows if tag in row.tags]
        summary, counts = summarize(members, gate_only=gate_only, ahead=ahead)
        slices[tag] = Slice(records=len(members), summary=summary, counts=counts)
    return slices
