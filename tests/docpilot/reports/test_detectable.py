"""A paired test with no evidence says beside it the smallest change it would have called (metrics.power)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from docpilot.metrics.power import mcnemar_detectable, wilcoxon_detectable
from rich.console import Console

from docpilot.reports.compare import OUTCOMES, paired_test
from docpilot.schema import Row

REFUSAL = next(o for o in OUTCOMES if o.name == "refusal_correct")
F1 = next(o for o in OUTCOMES if o.name == "answer_f1")


def _negative(i: int, refused: bool) -> Row:
    return Row(id=f"n{i}", kind="negative", split="dev", question="?", refused=refused)


def test_no_evidence_on_a_binary_outcome_names_the_change_the_set_could_see():
    # 40 negatives: 3 caught only in A, 3 only in B, the rest the same: no evidence, discordance 6/40.
    a = [_negative(i, refused=i < 3 or i >= 6) for i in range(40)]
    b = [_negative(i, refused=i >= 3) for i in range(40)]
    tested = paired_test(REFUSAL, list(zip(a, b, strict=True)), gate_only=False)
    assert tested.direction == "none" and tested.test == "mcnemar"
    assert tested.detectable == mcnemar_detectable(40, 6 / 40)
    assert f"would call a change of ±{tested.detectable:.3f} or more (α 0.05, power 0.8)" in tested.note


def test_a_called_change_has_no_detectable_figure():
    a = [_negative(i, refused=False) for i in range(40)]
    b = [_negative(i, refused=True) for i in range(40)]
    tested = paired_test(REFUSAL, list(zip(a, b, strict=True)), gate_only=False)
    assert tested.direction == "better" and tested.detectable is None


def test_no_evidence_on_a_continuous_outcome_reads_the_spread_of_the_differences():
    rng = np.random.default_rng(3)
    f1_a = rng.uniform(0, 1, 30).round(3)
    f1_b = (f1_a + rng.normal(0, 0.05, 30)).clip(0, 1).round(3)
    rows = [(Row(id=f"p{i}", kind="positive", split="dev", question="?", gold=["g"], gold_answer="x"),
             Row(id=f"p{i}", kind="positive", split="dev", question="?", gold=["g"], gold_answer="x"))
            for i in range(30)]
    scores = ({f"p{i}": float(v) for i, v in enumerate(f1_a)}, {f"p{i}": float(v) for i, v in enumerate(f1_b)})
    tested = paired_test(F1, rows, gate_only=False, scores=scores)
    assert tested.test == "wilcoxon"
    if tested.direction == "none":
        spread = float(np.std(f1_b - f1_a, ddof=1))
        assert tested.detectable == pytest.approx(wilcoxon_detectable(30, spread))


def test_the_variants_matrix_prints_it_beside_a_change_it_cannot_call():
    from docpilot.reports.matrix import _render_tests
    from docpilot.schema import PairedVerdict, VariantTest

    class _Report:  # the two fields _render_tests reads
        variants = [type("V", (), {"name": "base"})(), type("V", (), {"name": "other"})()]
        paired = PairedVerdict(baseline="base", alpha=0.05, tests=[
            VariantTest(variant="other", outcome="refusal_correct", test="mcnemar", n=40, baseline=0.5, value=0.52,
                        effect=0.02, p_value=0.6, p_holm=0.6, detectable=0.184)])

    out = io.StringIO()
    _render_tests(_Report(), Console(file=out, width=200))
    assert "+0.020 (p 0.6, could see ±0.184)" in out.getvalue()
