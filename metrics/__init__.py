"""Metrics: pure functions from a report's rows to the numbers DocPilot reports.

Nothing here reads files, clocks or loggers, and nothing imports an orchestrator:
the same rows always give the same numbers, so a stored report can be re-scored
and a number can gate CI.

Layout, one module per family of metrics, each giving per-record scores with the
formula in its docstring:

    gold        whether a section matches a gold entry or lies in a scope
    retrieval   recall@k, reciprocal rank, nDCG@k, context precision@k
    answer      SQuAD token F1, identifier recall, language match
    citations   citation precision/recall, hallucinated, out-of-scope, unlinked
    refusals    negatives caught, over-refusal and its Wilson bound, no-answer precision
    attacks     attack success, refusal accuracy, safe answers
    latency     nearest-rank percentiles of turn, first-token and stage times

and the machinery that turns scores into a run's numbers:

    population  which rows each metric reads
    aggregate   mean and total, None over no rows
    registry    metric id → definition (the ids are the report's summary keys)
    summary     summarize(rows) → (summary, counts); per_record(rows) long form
    gates       built-in and user gates, and the verdict
"""

from docpilot.metrics.gates import check_gates, parse_condition, verdict
from docpilot.metrics.registry import METRICS, RETRIEVAL_METRICS, Metric, get, names

__all__ = [
    "METRICS",
    "RETRIEVAL_METRICS",
    "Metric",
    "check_gates",
    "get",
    "names",
    "parse_condition",
    "per_record",
    "summarize",
    "verdict",
]


def __getattr__(name: str):
    # The summary is computed with NumPy: checking a config's gates (before a run's first
    # model call) needs only the registry, and does not wait for NumPy to load.
    if name in ("per_record", "summarize"):
        from docpilot.metrics import summary

        return getattr(summary, name)
    raise AttributeError(f"module 'metrics' has no attribute {name!r}")
