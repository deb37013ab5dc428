"""Slices: one summary per tag, equal to the summary of the tag's rows."""

from __future__ import annotations

from docpilot.metrics.slices import slice_by_tag
from docpilot.metrics.summary import summarize


def test_each_tag_gets_the_summary_of_its_rows(make_row) -> None:
    rows = [
        make_row("p1", gold=["a#"], retrieved=["a#"], answer="x", latency_ms=4.0, tags=["cli", "short"]),
        make_row("p2", gold=["a#"], retrieved=["b#"], answer="y", latency_ms=9.0, tags=["cli"]),
        make_row("n1", kind="negative", refused=True, refused_by="gate", latency_ms=1.0, tags=["short"]),
        make_row("p3", gold=["a#"], retrieved=["a#"], answer="z", latency_ms=2.0),
    ]
    slices = slice_by_tag(rows)
    assert list(slices) == ["cli", "short"]
    for tag, piece in slices.items():
        members = [r for r in rows if tag in r.tags]
        assert (piece.summary, piece.counts) == summarize(members) and piece.records == len(members)
    assert slices["cli"].summary["recall@8"] == 0.5 and slices["short"].summary["negatives_caught"] == 1.0


def test_rows_without_tags_give_no_slices(make_row) -> None:
    assert slice_by_tag([make_row("p1", gold=["a#"])]) == {}
    assert slice_by_tag([]) == {}


def test_a_gate_only_slice_holds_retrieval_only(make_row) -> None:
    rows = [make_row("p1", gold=["a#"], retrieved=["a#"], tags=["t"])]
    assert slice_by_tag(rows, gate_only=True)["t"].summary == summarize(rows, gate_only=True)[0]
