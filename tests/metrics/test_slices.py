"""Slices: one summary per tag, equal to the summary of the tag's rows."""

from __future__ import annotations

from docpilot.metrics.slices import overlap_band, slice_by_overlap, slice_by_tag
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


def test_each_overlap_band_gets_the_summary_of_its_positives(make_row) -> None:
    rows = [
        make_row("p1", gold=["a#"], retrieved=["a#"], overlap=0.2),
        make_row("p2", gold=["a#"], retrieved=["b#"], overlap=0.49),
        make_row("p3", gold=["a#"], retrieved=["a#"], overlap=0.5),  # a bound belongs to the band above it
        make_row("p4", gold=["a#"], retrieved=["a#"], overlap=1.0),
        make_row("p5", gold=["a#"], retrieved=["a#"], overlap=0.8),
        make_row("n1", kind="negative", refused=True, refused_by="gate"),  # no overlap: in no band
    ]
    bands = slice_by_overlap(rows, gate_only=True)
    assert list(bands) == ["low", "mid", "high"]
    assert [overlap_band(r.overlap) for r in rows] == ["low", "low", "mid", "high", "high", None]
    for name, members in (("low", rows[:2]), ("mid", rows[2:3]), ("high", rows[3:5])):
        assert (bands[name].summary, bands[name].counts) == summarize(members, gate_only=True)
        assert bands[name].records == len(members)
    assert bands["low"].summary["recall@8"] == 0.5 and bands["high"].summary["recall@8"] == 1.0
    assert slice_by_overlap(rows[5:]) == {}  # no band is listed empty
