"""Summaries: a report's rows turned into one value per metric id.

``summarize`` gives the run's numbers; ``per_record`` gives the values they were
aggregated from, one long row per record and metric, for slicing and for finding
the records behind a number.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.schema import Row
from metrics.registry import METRICS, RETRIEVAL_METRICS, Metric, stage_metrics

Summary = dict[str, float | int | None]
"""Metric id → the run's value; None when the metric had no rows to read."""
Counts = dict[str, int]
"""Metric id → how many rows its value was computed over."""


def reported_metrics(rows: Sequence[Row], *, gate_only: bool = False) -> list[Metric]:
    """The metrics a summary of ``rows`` holds, in report order.

    A run without a model (``gate_only``) reports retrieval only; otherwise every
    fixed metric, then the latency percentiles of each stage the rows report.
    """
    if gate_only:
        return [METRICS[name] for name in RETRIEVAL_METRICS]
    return [*METRICS.values(), *stage_metrics(rows)]


def evaluate(metric: Metric, rows: Sequence[Row]) -> tuple[float | int | None, int]:
    """One metric's value over ``rows`` and the number of rows in its population."""
    members = [row for row in rows if metric.population.includes(row)]
    return metric.aggregate([metric.score(row) for row in members]), len(members)


def summarize(rows: list[Row], *, gate_only: bool = False) -> tuple[Summary, Counts]:
    """The run's value and population size for every reported metric.

    A metric whose population is empty is None (never 0.0), with count 0.
    """
    summary: Summary = {}
    counts: Counts = {}
    for metric in reported_metrics(rows, gate_only=gate_only):
        summary[metric.id], counts[metric.id] = evaluate(metric, rows)
    return summary, counts


def per_record(rows: list[Row], *, gate_only: bool = False) -> list[dict[str, str | float]]:
    """Long-form per-record values: one ``{"id", "metric", "value"}`` per row and metric.

    Rows appear under the metrics whose population includes them, in row order then
    report order. Percentiles and confidence bounds are properties of the whole run
    and have no per-record value, so they are left out.
    """
    metrics = [m for m in reported_metrics(rows, gate_only=gate_only) if m.long_form]
    return [
        {"id": row.id, "metric": metric.id, "value": metric.score(row)}
        for row in rows
        for metric in metrics
        if metric.population.includes(row)
    ]
