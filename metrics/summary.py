"""Summaries: a report's rows turned into one value per metric id.

``summarize`` gives the run's numbers; ``per_record`` gives the values they were
aggregated from, one long row per record and metric, for slicing and for finding
the records behind a number.
"""

from __future__ import annotations

from collections.abc import Sequence

from docpilot.metrics import latency, relevance, retrieval
from docpilot.metrics import population as pop
from docpilot.metrics.aggregate import total
from docpilot.metrics.registry import METRICS, RETRIEVAL_METRICS, Metric, stage_metrics
from docpilot.metrics.stability import Rule, sampled
from docpilot.metrics.stability import per_record as by_record

from docpilot.schema import Row

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


BATCHES_KEPT = 16
"""Retrieval batches an ``Ahead`` keeps: the whole run's and its slices' (tags, bands, turns)."""


class Ahead:
    """Rows' metric values worked out before their summary, while a run's later rows are still to come.

    A run scores its rows shard by shard, and the model is still answering the last
    shards while the first are scored: ``add`` works out each row's values then, and
    ``summarize(rows, ahead=...)`` reads them instead of working them out after the
    last answer. Each value is the metric's own function of the row, and it is used
    only for the very row object it came from (a copy, or a row built again, is
    scored afresh). The retrieval metrics, computed over all rows at once, and the
    per-stage latencies are left to the summary.
    """

    def __init__(self) -> None:
        self._rows: dict[int, Row] = {}  # by id; the row is kept, so its id stays its own
        self._values: dict[str, dict[int, float]] = {}  # metric id → row id → value
        self._batches: list[tuple[list[Row], dict[str, list[float]]]] = []  # the last few, newest last

    def add(self, rows: Sequence[Row]) -> None:
        metrics = [m for m in METRICS.values() if m.family != "retrieval"]
        for metric in metrics:
            values = self._values.setdefault(metric.id, {})
            includes, score = metric.population.includes, metric.score
            for row in rows:
                if includes(row):
                    values[id(row)] = score(row)
        for row in rows:
            self._rows[id(row)] = row

    def values(self, metric: Metric, rows: Sequence[Row]) -> list[float]:
        """The metric's value for each row: the one worked out ahead, else worked out now."""
        known, held, score = self._values.get(metric.id, {}), self._rows, metric.score
        return [known[key] if (key := id(row)) in known and held.get(key) is row else score(row) for row in rows]

    def retrieval(self, population: list[Row]) -> dict[str, list[float]]:
        """The ranked metrics' values over ``population`` (``_retrieval_batch``), worked out once for the very
        same rows however often they are asked for (the summary, then the intervals)."""
        for held, values in self._batches:
            if len(held) == len(population) and all(a is b for a, b in zip(held, population, strict=True)):
                return values
        values = _retrieval_batch(population)
        self._batches = [*self._batches[-(BATCHES_KEPT - 1):], (list(population), values)]
        return values

    def clear(self) -> None:
        self._rows.clear()
        self._values.clear()
        self._batches.clear()


def summarize(rows: list[Row], *, gate_only: bool = False, ahead: Ahead | None = None,
              rule: Rule = "mean") -> tuple[Summary, Counts]:
    """The run's value and population size for every reported metric.

    A metric whose population is empty is None (never 0.0), with count 0. Each
    population is selected once, and the retrieval metrics are computed over all
    their rows at once (``metrics.relevance``), with the per-record functions' values.
    ``ahead`` holds values some rows' metrics already have (``Ahead``): the same numbers.

    Rows that hold several samples of a record (``--repeat``) are read one value per
    record, its samples read by ``rule`` (``metrics.stability``), and counted once; the
    latency and usage metrics read every sample, each a turn the run made.
    """
    summary: Summary = {}
    counts: Counts = {}
    members: dict[int, list[Row]] = {}
    batch: dict[str, list[float]] | None = None
    repeated = sampled(rows)
    for metric in reported_metrics(rows, gate_only=gate_only):
        population = members.get(id(metric.population))
        if population is None:
            population = members[id(metric.population)] = [r for r in rows if metric.population.includes(r)]
        if _batched(metric):
            if batch is None:
                batch = ahead.retrieval(population) if ahead is not None else _retrieval_batch(population)
            values = batch[metric.id]
        elif ahead is not None:
            values = ahead.values(metric, population)
        else:
            values = [metric.score(row) for row in population]
        if repeated and reads_records(metric):
            values = by_record(population, values, rule, higher_is_better=metric.higher_is_better)
        summary[metric.id], counts[metric.id] = metric.aggregate(values), len(values)
    return summary, counts


def reads_records(metric: Metric) -> bool:
    """Whether a run of several samples reads ``metric`` one value per record, its samples reduced by the rule.

    Not the times and usage, each sample a turn the run made and paid for, nor the counts
    (hallucinated citations, errors, ...): each defect a sample showed is one a reader saw.
    """
    return metric.family not in ("latency", "usage") and metric.aggregate is not total


def member_values(metrics: Sequence[Metric], rows: Sequence[Row], *,
                  ahead: Ahead | None = None) -> dict[str, tuple[list[Row], list[float]]]:
    """Metric id → its population among ``rows`` and each member's value, as ``summarize`` reads them (a row each).

    The ranked metrics come from one retrieval batch; ``ahead``'s values are used where it has them.
    """
    found: dict[str, tuple[list[Row], list[float]]] = {}
    batch: dict[str, list[float]] | None = None
    members: dict[int, list[Row]] = {}  # each population selected once, as in ``summarize``
    for metric in metrics:
        population = members.get(id(metric.population))
        if population is None:
            population = members[id(metric.population)] = [row for row in rows if metric.population.includes(row)]
        if _batched(metric):
            if batch is None:
                batch = ahead.retrieval(population) if ahead is not None else _retrieval_batch(population)
            found[metric.id] = population, batch[metric.id]
        elif ahead is not None:
            found[metric.id] = population, ahead.values(metric, population)
        else:
            found[metric.id] = population, [metric.score(row) for row in population]
    return found


def replayed_counts(rows: Sequence[Row], *, gate_only: bool = False) -> Counts:
    """Latency metric id → how many of the turns it is taken over were replayed from the cache.

    Beside a percentile's count, this says how much of it was measured in this run
    (``metrics.latency.replayed``). Only latency metrics are listed.
    """
    counts: Counts = {}
    for metric in reported_metrics(rows, gate_only=gate_only):
        if metric.family == "latency":
            counts[metric.id] = sum(
                1 for row in rows if metric.population.includes(row) and latency.replayed(row)
            )
    return counts


def _batched(metric: Metric) -> bool:
    """Whether a metric's values come from the retrieval batch: the ranked metrics, over the ranked positives."""
    return metric.family == "retrieval" and metric.population is pop.RANKED_POSITIVES


def _retrieval_batch(positives: list[Row]) -> dict[str, list[float]]:
    judged = relevance.judge([retrieval.as_read(row.retrieved, row.gold) for row in positives])
    return {name: values.tolist() for name, values in relevance.retrieval_scores(judged).items()}


def per_record(rows: list[Row], *, gate_only: bool = False) -> list[dict[str, str | float]]:
    """Long-form per-record values: one ``{"id", "metric", "value"}`` per row and metric.

    Rows appear under the metrics whose population includes them, in row order then
    report order. Percentiles and confidence bounds are properties of the whole run
    and have no per-record value, so they are left out.
    """
    metrics = [m for m in reported_metrics(rows, gate_only=gate_only) if m.long_form]
    # Each metric's values first (the retrieval metrics over all positives at once, as the
    # summary has them), then laid out row by row.
    values: dict[str, dict[int, float]] = {}
    batch: dict[str, list[float]] | None = None
    positives: list[Row] | None = None
    for metric in metrics:
        if _batched(metric):
            if batch is None:
                positives = [row for row in rows if metric.population.includes(row)]
                batch = _retrieval_batch(positives)
            values[metric.id] = {id(row): value for row, value in zip(positives or [], batch[metric.id], strict=True)}
        else:
            includes, score = metric.population.includes, metric.score
            values[metric.id] = {id(row): score(row) for row in rows if includes(row)}
    return [
        {"id": row.id, "metric": metric.id, "value": values[metric.id][id(row)]}
        for row in rows
        for metric in metrics
        if id(row) in values[metric.id]
    ]
