"""The cause `stale-gold`: a record whose gold the docs moved is the docs' to explain, before any retrieval cause."""

from __future__ import annotations

from docpilot.improve.taxonomy import RunSettings, causes_of, describe, what_moves
from docpilot.schema import Row

GOLD = "guide/tokens#rotate"


def _row(**fields) -> Row:
    base = dict(id="r", kind="positive", split="dev", question="How often do I rotate the token?", gold=[GOLD],
                retrieved=["guide/install#pip"], scores=[1.0])
    return Row(**{**base, **fields})


def test_stale_gold_comes_before_the_retrieval_miss_it_explains():
    run = RunSettings(gate_only=True)
    row = _row(gold_state="gone")
    assert causes_of(row, run) == ["stale-gold", "not-retrieved"]
    assert describe(row, "stale-gold", run) == f"its gold ({GOLD}) is gone from the docs since the set was locked"
    assert "golden check" in what_moves("stale-gold")
    assert causes_of(_row(), run) == ["not-retrieved"]  # no lock, or gold as locked: a retrieval miss as before


def test_a_record_whose_gold_changed_fails_until_a_person_reads_it_even_when_retrieved():
    row = _row(gold_state="changed", retrieved=[GOLD])
    assert causes_of(row, RunSettings(gate_only=True)) == ["stale-gold"]
    assert describe(row, "stale-gold", RunSettings()) == f"its gold ({GOLD}) says something else since the set was locked"
