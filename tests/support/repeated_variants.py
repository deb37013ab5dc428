"""A run of two variants that asked each question three times, built from a few hand-made rows.

Eight positives over eight pages, half of them ranked right. ``base`` answers every sample;
``shaky`` refuses the first sample of ``q1`` and ``q2``, so those two records are flaky in it
(2 of 3 samples passed) and nowhere else.
"""

from __future__ import annotations

from docpilot.config.variants import Variant
from docpilot.reports.report import rescore
from docpilot.reports.variants import join_variants
from docpilot.schema import Report, Row

SAMPLES = 3
FLAKY = ("q1", "q2")


def sampled_row(i: int, sample: int, *, refused: bool) -> Row:
    """Sample ``sample`` of record ``q{i}``, gold on page ``p{i}``, ranked right for even ``i``."""
    gold = f"p{i}#x"
    ranked = [gold] if i % 2 == 0 else ["other#y"]
    return Row(id=f"q{i}", kind="positive", split="dev", question=f"How do I do thing {i}?", gold=[gold],
               retrieved=ranked, primed=ranked, answer=None if refused else f"do thing {i}",
               gold_answer=f"do thing {i}", refused=refused, refused_by="model" if refused else None,
               sample=sample, latency_ms=10.0 + i, first_token_ms=5.0)


def variant_report(flaky: tuple[str, ...] = ()) -> Report:
    """One variant's report, scored from its rows as a run scores them."""
    rows = [sampled_row(i, s, refused=f"q{i}" in flaky and s == 0) for i in range(8) for s in range(SAMPLES)]
    return rescore(Report(run_id="r", created_at="2026-12-01T00:00:00+00:00", config={"gates": {}},
                          fingerprints={"model": "m", "config": "c"}, rows=rows, summary={}, gates=[],
                          verdict="pass"))


def repeated_variants() -> Report:
    """The joined report of ``base`` (steady) and ``shaky`` (flaky on ``FLAKY``)."""
    return join_variants([(Variant("base"), variant_report()), (Variant("shaky"), variant_report(FLAKY))])
