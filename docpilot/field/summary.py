"""The field summary: the eval's gold-free metrics over every turn of a log, kept as the log streams.

Each number is the eval metric of the same name, computed per turn by the same function
in ``docpilot.metrics`` and aggregated the same way; only the population differs, since a
log has no gold to split positives from negatives (every turn counts):

    refusal_rate            refused turns / turns, with ``refusal_rate_upper95``, its
                            one-sided 95 % Wilson upper bound (``metrics.refusals``)
    hallucinated_citations  markers or listed citations that name no shown source (a count)
    turns_with_hallucinated turns with at least one
    unlinked_answers        answered turns shown with sources and no working link
    uncited_answers         answered turns that cite nothing
    sources_outside_docs    shown sources that name nothing the docs hold (a count)
    language_match          answered turns whose answer's language is the question's / answered
    latency_p50/p95/p99     nearest-rank percentiles over turns with a time
    first_token_p50/p95     over answered turns that painted text (at their latency when not streamed)
    near_docs               turns whose question's evidence reaches ``near_evidence`` / turns

A metric with nothing to average over is None, never 0. Times are held as a float array
(8 bytes a turn), the only part that grows with the log.
"""

from __future__ import annotations

from array import array
from typing import Any

from docpilot.field.turns import FieldTurn
from docpilot.metrics.answer import language_match
from docpilot.metrics.citations import hallucinated_citations, is_unlinked, sources_outside_docs
from docpilot.metrics.latency import first_token, painted_answer, percentile
from docpilot.metrics.refusals import wilson_upper

__all__ = ["FieldSummary"]


class FieldSummary:
    """Counts and times over the turns added so far."""

    def __init__(self) -> None:
        self.turns = 0
        self.answered = 0
        self.refused = 0
        self.hallucinated = 0
        self.hallucinated_turns = 0
        self.unlinked = 0
        self.uncited = 0
        self.outside = 0
        self.outside_turns = 0
        self.language_matched = 0
        self.language_known = 0
        self.near = 0
        self.conversations = 0
        """Distinct conversations, set by the run from the scorer's count of each one's turns."""
        self.latency = array("d")
        self.first_token = array("d")

    def add(self, turn: FieldTurn) -> None:
        """Count one scored turn."""
        row = turn.row
        self.turns += 1
        self.refused += row.refused
        self.near += turn.near
        found = hallucinated_citations(row)
        self.hallucinated += found
        self.hallucinated_turns += found > 0
        outside = sources_outside_docs(row)
        self.outside += outside
        self.outside_turns += outside > 0
        if row.latency_ms is not None:
            self.latency.append(row.latency_ms)
        if painted_answer(row):
            self.first_token.append(first_token(row))
        if row.answered:
            self.answered += 1
            self.unlinked += is_unlinked(row)
            self.uncited += turn.uncited
            if row.language is not None:
                self.language_known += 1
                self.language_matched += language_match(row) == 1.0

    def merge(self, other: FieldSummary) -> None:
        """Add the turns another summary counted (a later part of the same log)."""
        for name, value in vars(other).items():
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)
        self.latency.extend(other.latency)
        self.first_token.extend(other.first_token)

    def metrics(self) -> dict[str, Any]:
        """The summary, by metric id."""
        n = self.turns
        return {
            "turns": n,
            "conversations": self.conversations,
            "answered": self.answered,
            "refused": self.refused,
            "refusal_rate": self.refused / n if n else None,
            "refusal_rate_upper95": wilson_upper(self.refused, n) if n else None,
            "hallucinated_citations": self.hallucinated,
            "turns_with_hallucinated": self.hallucinated_turns,
            "unlinked_answers": self.unlinked,
            "uncited_answers": self.uncited,
            "sources_outside_docs": self.outside,
            "turns_with_outside_docs": self.outside_turns,
            "language_match": self.language_matched / self.language_known if self.language_known else None,
            "latency_p50": percentile(self.latency, 50),
            "latency_p95": percentile(self.latency, 95),
            "latency_p99": percentile(self.latency, 99),
            "first_token_p50": percentile(self.first_token, 50),
            "first_token_p95": percentile(self.first_token, 95),
            "near_docs": self.near / n if n else None,
        }
