"""Slices: one summary per tag, over the rows that carry it, one per overlap band, and one per turn.

A slice is computed by ``summarize`` itself on the tag's rows, so it holds exactly
the numbers a run of those records alone (``docpilot eval --tag TAG``) reports.

A band gathers the positives by how much of their gold section's wording their
question reuses (``Row.overlap``, ``docpilot.retrieval.bias``): keyword retrieval does
better on a question that copies its passage, so a recall that holds only in the
``high`` band says little of the questions users type.

The turns of golden conversations are rows like any record's (``Row.turn``, 1 for the
first turn); ``slice_by_turn`` gathers them by where they sit in their conversation:
every first turn, every follow-up (turn 2 on), and each position on its own. A
follow-up is asked after the turns before it, so a retriever that reads the question
alone does well on first turns and badly on follow-ups, and the run's mean hides which.
Rows of single questions are in no turn slice.
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
    banded: dict[str | None, list[Row]] = {name: [] for name, _ in BANDS}
    for row in rows:
        banded.setdefault(overlap_band(row.overlap), []).append(row)
    bands = {}
    for name, _ in BANDS:
        if members := banded[name]:
            summary, counts = summarize(members, gate_only=gate_only, ahead=ahead)
            bands[name] = Slice(records=len(members), summary=summary, counts=counts)
    return bands


FIRST, FOLLOW_UP = "first", "follow-up"
"""The turn slices of every first turn and of every later one."""


def turn_slice_name(turn: int) -> str:
    """The name of the slice of one turn position: ``turn 2``."""
    return f"turn {turn}"


def slice_by_turn(rows: Sequence[Row], *, gate_only: bool = False, ahead: Ahead | None = None) -> dict[str, Slice]:
    """Turn slice → the summary of the conversation turns in it: ``first`` (turn 1), ``follow-up`` (turn 2 on),
    then ``turn 1``, ``turn 2``, ... in order; empty when no row is a turn of a conversation.

    Each slice is ``summarize`` over its turn rows, so a turn is averaged as a record is; a
    position no row holds, and ``follow-up`` in a run of first turns only, is left out.
    """
    turns = [row for row in rows if row.turn is not None]
    if not turns:
        return {}
    groups: dict[str, list[Row]] = {FIRST: [], FOLLOW_UP: []}
    for position in sorted({row.turn for row in turns if row.turn is not None}):
        groups[turn_slice_name(position)] = []
    for row in turns:
        groups[FIRST if row.turn == 1 else FOLLOW_UP].append(row)
        groups[turn_slice_name(row.turn)].append(row)
    slices = {}
    for name, members in groups.items():
        if members:
            summary, counts = summarize(members, gate_only=gate_only, ahead=ahead)
            slices[name] = Slice(records=len(members), summary=summary, counts=counts)
    return slices
