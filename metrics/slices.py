"""Slices: one summary per tag, over the rows that carry it, and one per overlap band.

A slice is computed by ``summarize`` itself on the tag's rows, so it holds exactly
the numbers a run of those records alone (``docpilot eval --tag TAG``) reports.

A band gathers the positives by how much of their gold section's wording their
question reuses (``Row.overlap``, ``docpilot.retrieval.bias``): keyword retrieval does
better on a question that copies its passage, so a recall that holds only in the
``high`` band says little of the questions users type.
"""

from __future__ import annotations

import math
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


BANDS: tuple[tuple[str, float], ...] = (("low", 0.5), ("mid", 0.8), ("high", math.inf))
"""Overlap bands, each with the overlap it stays below: under 0.5 ``low``, under 0.8 ``mid``, else ``high``."""


def overlap_band(overlap: float | None) -> str | None:
    """The band of an overlap value (``BANDS``); None for None."""
    if overlap is None:
        return None
    return next(name for name, below in BANDS if overlap < below)


def slice_by_overlap(rows: Sequence[Row], *, gate_only: bool = False, ahead: Ahead | None = None) -> dict[str, Slice]:
    """Band → the summary of the rows whose ``overlap`` falls in it; bands in ``BANDS`` order, empty ones left out."""
    bands = {}
    for name, _ in BANDS:
        members = [row for row in rows if overlap_band(row.overlap) == name]
        if members:
            summary, counts = summarize(members, gate_only=gate_only, ahead=ahead)
            bands[name] = Slice(records=len(members), summary=summary, counts=counts)
    return bands
