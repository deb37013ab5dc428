"""How each number of a run moved since an earlier run, and whether the move is more than noise.

A summary value moves by whole records: with 40 positives, recall@8 can only change
in steps of 1/40, and a smaller difference (a partial change of one record's F1, a
rounding) is no move. Times move a little on every run, so a time moves only when
the change is beyond both an absolute and a relative floor. Below its floor a change
is shown as no move (``same``).

Two things are kept apart: the *direction* of the value (``up``, ``down``) and the
*verdict* on it (``better``, ``worse``), which depends on the metric: latency going
up is worse, recall going up is better.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from docpilot.metrics import registry
from docpilot.schema import Report

TIME_FLOOR_MS = 1.0
"""A time moves only when it changed by at least this many milliseconds ..."""

TIME_FLOOR_SHARE = 0.10
"""... and by at least this share of the earlier value."""

_ROUNDING = 1e-9  # differences this small are float rounding, whatever the metric
_TIMES = ("latency_", "first_token_", "stage_")


class Move(BaseModel):
    """One metric of a run beside its value in an earlier run."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    """Metric id."""
    value: float | int | None
    """This run's value."""
    n: int | None
    """How many records this run's value is computed over."""
    previous: float | int | None
    """The earlier run's value; None when it had none or there is no earlier run."""
    delta: float | None
    """value − previous, exactly; None when either is None."""
    floor: float | None = None
    """The smallest change that counts as a move for this metric here; None when there is no delta."""
    direction: Literal["up", "down", "same"] | None = None
    """Which way the value went, `same` when the change is below the floor; None when it cannot be told."""
    change: Literal["better", "worse", "same"] | None
    """Whether the move is good or bad for this metric; `same` below the floor; None when it cannot be told."""


def noise_floor(metric: str, n: int | None, previous: float | int | None) -> float:
    """The smallest change of ``metric`` that counts as a move.

    Times: the larger of ``TIME_FLOOR_MS`` and ``TIME_FLOOR_SHARE`` of the earlier
    value. Counts (citations invented, errors): one. Rates and averages over n records:
    one record's worth, 1/n. Anything else: any change beyond rounding.
    """
    if metric.startswith(_TIMES):
        return max(TIME_FLOOR_MS, TIME_FLOOR_SHARE * abs(previous or 0.0))
    if registry.is_metric_id(metric) and registry.get(metric).counts_records:
        return 1.0
    if n:
        return 1.0 / n
    return _ROUNDING


def metric_moves(current: Report, previous: Report | None) -> list[Move]:
    """Every metric of ``current``'s summary, in report order, with its move since ``previous``."""
    moves = []
    for metric, value in current.summary.items():
        before = previous.summary.get(metric) if previous is not None else None
        n = current.counts.get(metric)
        if n is None and previous is not None:
            n = previous.counts.get(metric)
        delta = None if value is None or before is None else value - before
        floor = None if delta is None else noise_floor(metric, n, before)
        direction, change = _judge(metric, delta, floor)
        moves.append(Move(metric=metric, value=value, n=n, previous=before, delta=delta, floor=floor,
                          direction=direction, change=change))
    return moves


def _judge(metric: str, delta: float | None, floor: float | None) -> tuple[
        Literal["up", "down", "same"] | None, Literal["better", "worse", "same"] | None]:
    if delta is None or floor is None:
        return None, None
    # A change of exactly one record's worth is a move; the tolerance absorbs float rounding.
    if abs(delta) < floor - _ROUNDING or abs(delta) <= _ROUNDING:
        return "same", "same"
    direction: Literal["up", "down"] = "up" if delta > 0 else "down"
    if not registry.is_metric_id(metric):
        return direction, None  # a metric this version does not know: its direction is unknown
    higher = registry.get(metric).higher_is_better
    return direction, "better" if (delta > 0) == higher else "worse"
