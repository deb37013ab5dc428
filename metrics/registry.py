"""The metric registry: every metric DocPilot reports, as data.

A metric id (``recall@8``, ``context_precision@5``) is at once the registry key, the
report's summary key and the name the CLI and gates accept. Each entry says which
rows it reads (its population), how one row is scored, and how the scores become
the run's value. Per-stage latencies (``stage_<name>_p50`` / ``_p95``) depend on
the stages a run reports, so ``get`` builds them on request.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from types import MappingProxyType
from typing import Literal

from docpilot.metrics import answer, attacks, citations, errors, latency, refusals, retrieval, usage
from docpilot.metrics import population as pop
from docpilot.metrics.aggregate import mean, total
from docpilot.metrics.population import Population

from docpilot.errors import InputError
from docpilot.schema import Row

Family = Literal["retrieval", "answer", "citations", "refusals", "attacks", "latency", "usage"]


@dataclass(frozen=True)
class Metric:
    """One reported number: what it reads, how a row scores, how scores combine."""

    id: str
    """Canonical id: registry key, summary key and CLI name."""
    description: str
    """One line on what the number says."""
    family: Family
    """The group it belongs to (and the module that defines its formula)."""
    population: Population
    """The rows it averages or counts over; its count in a summary is their number."""
    score: Callable[[Row], float]
    """The value of one row of the population."""
    aggregate: Callable[[Sequence[float]], float | int | None]
    """How the population's values become the run's value; None for no values."""
    _: KW_ONLY
    higher_is_better: bool
    """Direction of improvement, for comparing runs."""
    long_form: bool = True
    """Whether ``score`` is itself a per-record result worth listing (not for percentiles)."""
    counts_records: bool = False
    """Whether a record scoring above 0 is one that breaks a gate on this metric."""


def _ranked(fn: Callable[..., float], **kwargs: int) -> Callable[[Row], float]:
    """Score a row by the top of its ranked list (``RANK_DEPTH`` sections) and its gold entries, as read
    (``retrieval.as_read``: at page level when the ranking names pages)."""

    def score(row: Row) -> float:
        return fn(*retrieval.as_read(row.retrieved, row.gold), **kwargs)

    score.__name__ = fn.__name__
    return score


def _mean(metric_id: str, description: str, family: Family, population: Population,
          score: Callable[[Row], float], *, higher_is_better: bool = True) -> Metric:
    """A metric whose value is the mean of its rows' scores."""
    return Metric(metric_id, description, family, population, score, mean,
                  higher_is_better=higher_is_better)


def _count(metric_id: str, description: str, score: Callable[[Row], int]) -> Metric:
    """A count over every row; each record it counts breaks a gate on it."""
    return Metric(metric_id, description, "citations", pop.ALL, score, total,
                  higher_is_better=False, counts_records=True)


def _upper95(metric_id: str, of: str, score: Callable[[Row], float]) -> Metric:
    """The one-sided 95 % Wilson upper bound of a rate over the positives."""
    return Metric(metric_id, f"one-sided 95% Wilson upper bound of {of}", "refusals",
                  pop.POSITIVES, score, refusals.wilson_upper95,
                  higher_is_better=False, long_form=False)


def _latency(metric_id: str, what: str, population: Population,
             score: Callable[[Row], float], p: int) -> Metric:
    """A nearest-rank percentile of a time, in milliseconds."""
    return Metric(metric_id, f"{what}, nearest-rank p{p} (ms)", "latency", population,
                  score, latency.at_percentile(p), higher_is_better=False, long_form=False)


def _usage_metrics() -> list[Metric]:
    """Tokens and cost (``metrics.usage``): the run's totals and the part reused from the cache."""
    found = []
    for suffix, where, reported, priced in (
        ("", "", usage.REPORTED, usage.PRICED),
        ("_cached", ", part reused from the cache", usage.REPORTED_CACHED, usage.PRICED_CACHED),
    ):
        found += [
            Metric(f"prompt_tokens{suffix}", f"prompt tokens the service reported{where}", "usage",
                   reported, usage.prompt_tokens, total, higher_is_better=False),
            Metric(f"completion_tokens{suffix}", f"completion tokens the service reported{where}", "usage",
                   reported, usage.completion_tokens, total, higher_is_better=False),
            Metric(f"cost_usd{suffix}", f"US dollars at the configured prices{where}", "usage",
                   priced, usage.cost_usd, usage.dollars, higher_is_better=False),
        ]
    found.append(Metric("truncated_answers", "answers that stopped at max_tokens, kept and scored", "usage",
                        usage.TRUNCATION_KNOWN, usage.truncated, total, higher_is_better=False))
    return found


_METRICS: tuple[Metric, ...] = (
    *(
        _mean(f"recall@{k}", f"share of gold entries matched in the top {k}", "retrieval",
              pop.RANKED_POSITIVES, _ranked(retrieval.recall_at_k, k=k))
        for k in retrieval.RECALL_CUTOFFS
    ),
    _mean("mrr", f"reciprocal rank of the first relevant section in the top {retrieval.RANK_DEPTH}",
          "retrieval", pop.RANKED_POSITIVES, _ranked(retrieval.reciprocal_rank)),
    _mean(f"ndcg@{retrieval.RANK_DEPTH}", f"binary nDCG at {retrieval.RANK_DEPTH}, each gold entry credited once",
          "retrieval", pop.RANKED_POSITIVES, _ranked(retrieval.ndcg_at_k, k=retrieval.RANK_DEPTH)),
    _mean(f"context_precision@{retrieval.CONTEXT_PRECISION_CUTOFF}",
          f"RAGAS context precision over the top {retrieval.CONTEXT_PRECISION_CUTOFF}", "retrieval",
          pop.RANKED_POSITIVES, _ranked(retrieval.context_precision_at_k, k=retrieval.CONTEXT_PRECISION_CUTOFF)),
    _mean("answer_f1", "SQuAD token F1 of the answer against the gold answer", "answer",
          pop.POSITIVES_WITH_GOLD_ANSWER, answer.answer_f1),
    _mean("identifier_recall", "share of required identifiers found verbatim", "answer",
          pop.POSITIVES_WITH_IDENTIFIERS, answer.identifier_recall),
    _mean("language_match", "share of answers in the record's language", "answer",
          pop.ANSWERED_WITH_LANGUAGE, answer.language_match),
    _mean("citation_precision", "share of cited sections that match gold", "citations",
          pop.ANSWERED_POSITIVES_CITING, citations.citation_precision),
    _mean("citation_recall", "share of gold entries some citation matches", "citations",
          pop.ANSWERED_POSITIVES, citations.citation_recall),
    _count("hallucinated_citations", "markers pointing at no primed source",
           citations.hallucinated_citations),
    _count("scope_violations", "retrieved or cited sections outside the record's scope",
           citations.scope_violations),
    _count("sources_outside_docs", "returned sources that name nothing the docs hold",
           citations.sources_outside_docs),
    _count("unlinked_answers", "answered positives shown with Sources but no working link",
           citations.unlinked_answers),
    _count("unlinked_negatives", "answered negatives shown with Sources but no working link",
           citations.unlinked_negatives),
    Metric("errors", "records whose turn a model or network fault cut short", "answer",
           pop.ALL, errors.errored, total, higher_is_better=False, counts_records=True),
    _mean("negatives_caught", "share of negatives refused", "refusals",
          pop.NEGATIVES, refusals.negative_caught),
    _mean("over_refusal_gate", "share of positives the gate refused", "refusals",
          pop.POSITIVES, refusals.refused_by_gate, higher_is_better=False),
    _upper95("over_refusal_gate_upper95", "over_refusal_gate", refusals.refused_by_gate),
    _mean("over_refusal_answer", "share of positives the model refused", "refusals",
          pop.POSITIVES, refusals.refused_by_model, higher_is_better=False),
    _upper95("over_refusal_answer_upper95", "over_refusal_answer", refusals.refused_by_model),
    _mean("no_answer_precision", "share of gate refusals naming the expected cause",
          "refusals", pop.GATE_REFUSALS, refusals.cause_correct),
    Metric("attack_success_rate", "share of probes whose reply or reasoning leaked",
           "attacks", pop.PROBES, attacks.attack_succeeded, mean,
           higher_is_better=False, counts_records=True),
    _mean("refusal_accuracy", "share of refuse-expecting probes that were refused",
          "attacks", pop.PROBES_EXPECTING_REFUSAL, attacks.refusal_correct),
    _mean("safe_answer_rate", "share of probes with nothing forbidden and no error",
          "attacks", pop.PROBES, attacks.answered_safely),
    _latency("latency_p50", "turn latency", pop.TIMED, latency.latency, 50),
    _latency("latency_p95", "turn latency", pop.TIMED, latency.latency, 95),
    _latency("latency_p99", "turn latency", pop.TIMED, latency.latency, 99),
    _latency("first_token_p50", "time to first answer text", pop.PAINTED,
             latency.first_token, 50),
    _latency("first_token_p95", "time to first answer text", pop.PAINTED,
             latency.first_token, 95),
    *_usage_metrics(),
)

METRICS: Mapping[str, Metric] = MappingProxyType({m.id: m for m in _METRICS})
"""Every fixed metric by id, in report order (per-stage latencies are not listed)."""

RETRIEVAL_METRICS: list[str] = [m.id for m in _METRICS if m.family == "retrieval"]
"""The metrics a run without a model (``--gate-only``) reports."""

STAGE_PERCENTILES: tuple[int, ...] = (50, 95)
"""Percentiles reported for each server stage."""

_STAGE_ID = re.compile(r"^stage_(?P<stage>.+)_p(?P<p>\d+)$")


def stage_metric_id(stage: str, p: int) -> str:
    """The id of the ``p``-th percentile of stage ``stage``: ``stage_embed_p95``."""
    return f"stage_{stage}_p{p}"


def stage_metric(stage: str, p: int) -> Metric:
    """The nearest-rank ``p``-th percentile of the time rows spent in stage ``stage``."""

    def score(row: Row) -> float:
        return row.stages_ms[stage]

    return _latency(stage_metric_id(stage, p), f"time in stage {stage!r}",
                    pop.with_stage(stage), score, p)


def stage_metrics(rows: Sequence[Row]) -> list[Metric]:
    """The per-stage percentiles for every stage the rows report, by stage name then p."""
    return [stage_metric(name, p) for name in latency.stage_names(rows)
            for p in STAGE_PERCENTILES]


def names() -> list[str]:
    """Every fixed metric id, in report order."""
    return list(METRICS)


def is_metric_id(name: str) -> bool:
    """Whether ``name`` is a fixed metric id or a well-formed per-stage latency id."""
    return name in METRICS or _parse_stage_id(name) is not None


def get(name: str) -> Metric:
    """The metric called ``name``; an InputError listing the valid ids for an unknown one."""
    if name in METRICS:
        return METRICS[name]
    parsed = _parse_stage_id(name)
    if parsed is not None:
        return stage_metric(*parsed)
    close = difflib.get_close_matches(name, METRICS, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError(
        f"unknown metric {name!r}{guess}",
        hint="use one of: " + ", ".join(METRICS)
        + ", or stage_<name>_p50 / stage_<name>_p95 for a server stage",
    )


def _parse_stage_id(name: str) -> tuple[str, int] | None:
    match = _STAGE_ID.match(name)
    if match is None or int(match["p"]) not in STAGE_PERCENTILES:
        return None
    return match["stage"], int(match["p"])
