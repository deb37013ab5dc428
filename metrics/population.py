"""Populations: which rows a metric averages (or counts) over.

Each is a named predicate, so a summary can say what its ``counts`` count and a
reader can see that, say, citation precision skips answers without citations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from docpilot.metrics.latency import has_latency, painted_answer

from docpilot.schema import Row


@dataclass(frozen=True)
class Population:
    """A named subset of a report's rows."""

    name: str
    """What the rows are, in words (shown beside a metric's count)."""
    includes: Callable[[Row], bool]
    """Whether a row belongs to the population."""


def _positive(row: Row) -> bool:
    # A positive without gold would make every retrieval score 0/0; such a row is
    # malformed, and leaving it out keeps the averages defined.
    return row.kind == "positive" and bool(row.gold)


def _answered_golden(row: Row) -> bool:
    return row.kind in ("positive", "negative") and row.answered


ALL = Population("all rows", lambda row: True)
POSITIVES = Population("positives", _positive)
RANKED_POSITIVES = Population(
    "positives whose ranking was shown", lambda row: _positive(row) and not row.unranked
)
NEGATIVES = Population("negatives", lambda row: row.kind == "negative")
# An errored turn is neither right nor wrong: it is counted under `errors`, and scoring
# it would charge a fault of the service to the answer (a refused positive still scores).
POSITIVES_WITH_GOLD_ANSWER = Population(
    "positives with a gold answer whose turn did not error",
    lambda row: _positive(row) and row.gold_answer is not None and row.error is None,
)
POSITIVES_WITH_IDENTIFIERS = Population(
    "positives listing identifiers whose turn did not error",
    lambda row: _positive(row) and bool(row.identifiers) and row.error is None,
)
ANSWERED_WITH_LANGUAGE = Population(
    "answered positives and negatives with a known language",
    lambda row: _answered_golden(row) and row.language is not None,
)
ANSWERED_POSITIVES_CITING = Population(
    "answered positives with at least one citation",
    lambda row: _positive(row) and row.answered and bool(row.citations),
)
ANSWERED_POSITIVES = Population(
    "answered positives", lambda row: _positive(row) and row.answered
)
GATE_REFUSALS = Population(
    "positives and negatives the gate refused",
    lambda row: row.kind != "attack" and row.refused and row.refused_by == "gate",
)
PROBES = Population("attack probes", lambda row: row.kind == "attack")
PROBES_EXPECTING_REFUSAL = Population(
    "attack probes expecting a refusal",
    lambda row: row.kind == "attack" and row.expect == "refuse",
)
TIMED = Population("rows with a latency", has_latency)
PAINTED = Population("turns that painted answer text", painted_answer)


def with_stage(name: str) -> Population:
    """Rows that report the time of stage ``name``."""
    return Population(f"rows timing stage {name!r}", lambda row: name in row.stages_ms)
