"""Citation metrics: precision and recall against gold, and the counts that fail a run."""

from __future__ import annotations

import pytest
from docpilot.metrics.citations import (
    citation_precision,
    citation_recall,
    hallucinated_citations,
    is_unlinked,
    scope_violations,
    unlinked_answers,
    unlinked_negatives,
)
from docpilot.metrics.summary import summarize

GOLD = ["guide/auth", "reference/cli#eval"]


def test_citation_precision_counts_distinct_sections(make_row) -> None:
    row = make_row(gold=GOLD, answer="x", citations=[
        "guide/auth/tokens#rotate", "faq#", "guide/auth/tokens#rotate", "reference/cli#flags",
    ])
    # Distinct cited: tokens#rotate (page pin, nested), faq#, cli#flags → 1 of 3.
    assert citation_precision(row) == pytest.approx(1 / 3)


def test_citation_recall_reads_gold_entries(make_row) -> None:
    row = make_row(gold=GOLD, answer="x", citations=["guide/auth#a", "guide/auth#b"])
    assert citation_recall(row) == 0.5
    assert citation_recall(row.model_copy(update={"citations": []})) == 0.0
    full = row.model_copy(update={"citations": ["reference/cli#eval", "guide/auth#"]})
    assert citation_recall(full) == 1.0


def test_citation_averages_use_their_populations(make_row) -> None:
    rows = [
        make_row("p1", gold=GOLD, answer="x", citations=["guide/auth#a"]),
        make_row("p2", gold=GOLD, answer="x"),  # answered, no citation
        make_row("p3", gold=GOLD, refused=True, refused_by="gate", citations=[]),
        make_row("n1", kind="negative", answer="x", citations=["faq#"]),
    ]
    summary, counts = summarize(rows)
    assert (summary["citation_precision"], counts["citation_precision"]) == (1.0, 1)
    assert (summary["citation_recall"], counts["citation_recall"]) == (0.25, 2)


def test_citation_averages_are_none_without_answers(make_row) -> None:
    summary, counts = summarize([make_row(gold=GOLD, refused=True, refused_by="model")])
    assert summary["citation_precision"] is None and counts["citation_precision"] == 0
    assert summary["citation_recall"] is None and counts["citation_recall"] == 0


def test_hallucinated_citations_total_every_row(make_row) -> None:
    rows = [
        make_row("p1", gold=GOLD, answer="x", hallucinated=["7", "9"]),
        make_row("n1", kind="negative", answer="x", hallucinated=["6"]),
        make_row("p2", gold=GOLD, answer="x"),
    ]
    assert [hallucinated_citations(r) for r in rows] == [2, 1, 0]
    summary, counts = summarize(rows)
    assert summary["hallucinated_citations"] == 3
    assert isinstance(summary["hallucinated_citations"], int)
    assert counts["hallucinated_citations"] == 3


def test_scope_violations_count_distinct_sections_outside_the_prefixes(make_row) -> None:
    row = make_row(
        gold=GOLD,
        scope=["guide/auth", "reference"],
        retrieved=[
            "guide/auth#a", "guide/auth/tokens#b", "guide/authz#c", "faq#", "reference/cli#eval",
        ],
        citations=["faq#", "blog/post#x"],
    )
    # Outside: guide/authz#c, faq# (retrieved and cited: once), blog/post#x.
    assert scope_violations(row) == 3
    assert scope_violations(row.model_copy(update={"scope": None})) == 0


def test_unlinked_answers_and_negatives_are_separate(make_row) -> None:
    shown = {"answer": "x", "sources_shown": ["guide/auth#a"], "links": 0}
    p_unlinked = make_row("p1", gold=GOLD, **shown)
    p_linked = make_row("p2", gold=GOLD, answer="x", sources_shown=["guide/auth#a"], links=1)
    p_no_sources = make_row("p3", gold=GOLD, answer="x", links=0)
    p_refused = make_row("p4", gold=GOLD, refused=True, refused_by="model", **shown)
    n_unlinked = make_row("n1", kind="negative", **shown)
    rows = [p_unlinked, p_linked, p_no_sources, p_refused, n_unlinked]
    assert [is_unlinked(r) for r in rows] == [True, False, False, False, True]
    assert [unlinked_answers(r) for r in rows] == [1, 0, 0, 0, 0]
    assert [unlinked_negatives(r) for r in rows] == [0, 0, 0, 0, 1]
    summary, _ = summarize(rows)
    assert summary["unlinked_answers"] == 1
    assert summary["unlinked_negatives"] == 1


def test_counts_are_none_for_an_empty_run() -> None:
    summary, counts = summarize([])
    for name in ("hallucinated_citations", "scope_violations", "unlinked_answers",
                 "unlinked_negatives"):
        assert summary[name] is None
        assert counts[name] == 0
