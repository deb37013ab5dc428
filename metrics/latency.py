"""Latency metrics: how long a reader waited, for the whole turn and for the first words.

Times are milliseconds as the rows recorded them; percentiles are nearest-rank, so
every reported value is a time some record actually took.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from docpilot.schema import Row


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: the ⌈p/100 · n⌉-th smallest value; None when there are none.

        P_p = x_(max(1, ⌈p · n / 100⌉)),  x_(1) ≤ … ≤ x_(n)

    With fewer than 100 values p99 is the largest. The rank is computed in exact
    arithmetic (``Fraction(str(p))``) so that, say, 7 % of 100 is rank 7, not 8.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = math.ceil(Fraction(str(p)) * len(ordered) / 100)
    return float(ordered[max(rank, 1) - 1])


def at_percentile(p: float) -> Callable[[Sequence[float]], float | None]:
    """An aggregation that takes the nearest-rank ``p``-th percentile of its values."""

    def aggregate(values: Sequence[float]) -> float | None:
        return percentile(values, p)

    aggregate.__name__ = f"p{p:g}"
    return aggregate


def has_latency(row: Row) -> bool:
    """Whether the row recorded the time of its turn."""
    return row.latency_ms is not None


def latency(row: Row) -> float:
    """The turn's time from sending the question to its end."""
    if row.latency_ms is None:
        raise ValueError(f"row {row.id!r} has no latency_ms; select rows with has_latency")
    return row.latency_ms


def painted_answer(row: Row) -> bool:
    """Whether the turn put answer text in front of the reader, with a time to show for it.

    Only answered turns count: a gate refusal paints nothing, a model refusal paints
    a refusal notice rather than answer text, and an errored turn has no answer.
    """
    has_time = row.first_token_ms is not None or row.latency_ms is not None
    return row.answered and bool((row.answer or "").strip()) and has_time


def first_token(row: Row) -> float:
    """Time to the first answer text; a turn that never streamed counts at its latency.

    An answer that arrived whole reaches the screen at the end of the turn, so its
    wait is the full latency, not nothing.
    """
    value = row.first_token_ms if row.first_token_ms is not None else row.latency_ms
    if value is None:
        raise ValueError(f"row {row.id!r} has no time; select rows with painted_answer")
    return value


def replayed(row: Row) -> bool:
    """Whether the row's time was replayed from the stage cache rather than measured in this run.

    The model's time is most of an answered turn's, so such a turn counts as replayed
    when its model stage came from the cache; a turn with no model stage (a gate
    refusal, a gate-only run) when its ranking did. A percentile over many replayed
    turns describes the run that first computed them, not this one.
    """
    if "model" in row.stages_ms:
        return "model" in row.cached
    return "retrieve" in row.cached


def stage_names(rows: Sequence[Row]) -> list[str]:
    """Every stage name found in the rows' ``stages_ms``, sorted."""
    return sorted({name for row in rows for name in row.stages_ms})
