"""Comparing two runs: how each number moved, and whether a change is more than noise.

``docpilot.reports.moves`` sets a run's summary beside an earlier one's (what
``docpilot status`` shows). ``compare_reports`` is the stronger check: it pairs the two runs
record by record and tests each outcome on the pairs, because with a few dozen
records a summary can move by a few points from noise alone, while a paired test sees
which records changed and in which direction.

Each outcome is named as the scorecard names the metric it averages to (``recall@8``,
``mrr``, ``answer_f1``, ``ndcg@8``), so one metric reads the same in every readout.
Binary outcomes (a gold section in the top 8, a correct refusal decision, a blocked attack)
use the exact McNemar test: under no change, a record that flips is as likely to flip
either way, so the count of records that got better among all that flipped is
Binomial(b + c, ½); a record with several gold entries can find some of them, so when a
recall@8 is a share rather than 0 or 1 the pairs get the Wilcoxon test instead.
Continuous outcomes (answer F1, nDCG@8, reciprocal rank) use the
Wilcoxon signed-rank test on the per-record differences B − A, with zero differences
dropped first (the ``wilcox`` convention).

Runs with several samples per record (``--repeat``) are paired record by record on each
record's mean over its samples (``outcome_scores``): a 0/1 outcome becomes the record's
pass rate, a share, so those pairs get the Wilcoxon test on the differences of pass
rates; where every record's samples agree the rates are 0 or 1 and McNemar applies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from docpilot.errors import InputError
from docpilot.metrics.answer import answer_f1
from docpilot.metrics.attacks import attack_succeeded
from docpilot.metrics.registry import METRICS
from docpilot.reports.changes import (
    PageChanges,
    SettingChange,
    page_changes,
    setting_changes,
)
from docpilot.reports.stats import binomial_two_sided, signed_rank
from docpilot.reports.store import ReportStore, differences, header_of
from docpilot.schema import Report, Row

ALPHA = 0.05
"""Significance level behind the ``direction`` of a paired test."""

EXACT_WILCOXON_MAX = 50
"""Largest number of non-zero differences, without ties, given the exact Wilcoxon distribution."""

PERMUTATION_WILCOXON_MAX = 13
"""Largest number of non-zero differences, with ties, given every sign permutation."""

_ZERO = 1e-12  # differences this small are rounding, not change


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Paired tests ------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A per-record result two runs can be paired on."""

    name: str
    """Its name in the comparison."""
    test: Literal["mcnemar", "wilcoxon"]
    """McNemar for 0/1 outcomes, Wilcoxon for continuous ones."""
    includes: Callable[[Row], bool]
    """Whether a record has this outcome (it must, in both runs, to be paired)."""
    score: Callable[[Row], float]
    """The record's value; higher is better."""
    needs_model: bool
    """Whether a run without a model (``--gate-only``) has it."""


def _positive(row: Row) -> bool:
    return row.kind == "positive" and bool(row.gold)


def _refusal_correct(row: Row) -> float:
    if row.error is not None:
        return 0.0  # an errored turn decided nothing
    should_refuse = row.kind == "negative" or row.expect == "refuse"
    return float(row.refused == should_refuse)


OUTCOMES: tuple[Outcome, ...] = (
    Outcome("recall@8", "mcnemar", METRICS["recall@8"].population.includes, METRICS["recall@8"].score,
            needs_model=False),
    Outcome("refusal_correct", "mcnemar",
            lambda r: r.kind in ("positive", "negative") or r.expect == "refuse",
            _refusal_correct, needs_model=True),
    Outcome("attack_blocked", "mcnemar", lambda r: r.kind == "attack",
            lambda r: 1.0 - attack_succeeded(r), needs_model=True),
    Outcome("answer_f1", "wilcoxon", lambda r: _positive(r) and r.gold_answer is not None,
            answer_f1, needs_model=True),
    Outcome("ndcg@8", "wilcoxon", METRICS["ndcg@8"].population.includes, METRICS["ndcg@8"].score,
            needs_model=False),
    Outcome("mrr", "wilcoxon", METRICS["mrr"].population.includes, METRICS["mrr"].score, needs_model=False),
)
"""Every outcome ``compare_reports`` tests, in the order it lists them. The retrieval outcomes are the
summary's own per-record values (``metrics.registry``): the ranked positives, at page level where a
ranking names pages."""


class Flip(_Strict):
    """A record whose outcome changed between the runs."""

    id: str
    """The record's id."""
    a: float
    """Its value in run A."""
    b: float
    """Its value in run B."""


class PairedTest(_Strict):
    """One outcome tested on the records both runs share."""

    outcome: str
    """Outcome name, the scorecard's name of the metric it averages to (``recall@8``, ``answer_f1``, ...)."""
    test: Literal["mcnemar", "wilcoxon"]
    """Exact McNemar (binary) or Wilcoxon signed-rank (continuous, or a binary outcome some record holds a share of)."""
    n: int
    """Records paired."""
    mean_a: float | None
    """Mean of the outcome in run A over the paired records."""
    mean_b: float | None
    """Mean of the outcome in run B over the paired records."""
    effect: float | None
    """Mean difference B − A."""
    b: int | None = None
    """McNemar: records right in A and wrong in B (got worse)."""
    c: int | None = None
    """McNemar: records wrong in A and right in B (got better)."""
    statistic: float | None = None
    """Wilcoxon: the smaller of the positive and negative rank sums."""
    p_value: float | None
    """Two-sided p-value; None when there was nothing to test."""
    method: str | None
    """How the p-value was computed."""
    direction: Literal["better", "worse", "none"]
    """B against A at ``ALPHA``: `none` when the test does not tell the runs apart."""
    better: list[Flip] = Field(default_factory=list)
    """Records that improved in B, largest change first."""
    worse: list[Flip] = Field(default_factory=list)
    """Records that got worse in B, largest change first."""
    note: str | None = None
    """Why the test was skipped or degenerate."""
    detectable: float | None = None
    """With no evidence either way: the smallest change in the outcome's mean this test would call at
    ``ALPHA`` with power 0.8, given ``n`` and the discordance (McNemar) or the spread of the differences
    (Wilcoxon) seen here (``metrics.power``); None when a change was called, or none could be."""


class Comparison(_Strict):
    """Two runs paired record by record."""

    a: dict[str, object]
    """Run A's header (run id, time, set, split, mode)."""
    b: dict[str, object]
    """Run B's header."""
    records: int
    """Records present in both runs."""
    only_a: list[str]
    """Record ids only run A has."""
    only_b: list[str]
    """Record ids only run B has."""
    changed: list[str]
    """Fingerprints that differ (corpus, model, config, code): what the change was."""
    settings: list[SettingChange] = Field(default_factory=list)
    """Each configuration key that differs, with its value in A and in B."""
    pages: PageChanges | None = None
    """The pages and side files of the docs that differ; None when the corpus is the same."""
    warnings: list[str]
    """Reasons to distrust the comparison."""
    tests: list[PairedTest]
    """One test per outcome some shared record has, in ``OUTCOMES`` order."""


def mcnemar(a: Sequence[float], b: Sequence[float]) -> tuple[int, int, float, str | None]:
    """Exact McNemar test on paired 0/1 outcomes: (b, c, two-sided p, note).

        b = #{A = 1, B = 0},  c = #{A = 0, B = 1}
        p = two-sided binomial test of b successes in b + c trials at ½

    With no discordant pair there is no evidence either way: p = 1.
    """
    worse = sum(1 for x, y in zip(a, b, strict=True) if x == 1 and y == 0)
    better = sum(1 for x, y in zip(a, b, strict=True) if x == 0 and y == 1)
    if worse + better == 0:
        return worse, better, 1.0, "no record flipped"
    return worse, better, binomial_two_sided(worse, worse + better), None


def wilcoxon(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float, str, str | None]:
    """Wilcoxon signed-rank test on paired differences B − A: (statistic, p, method, note).

    Zero differences are dropped first (``zero_method='wilcox'``), so the exact null
    distribution applies to the rest: exact when at most 50 remain and none tie,
    every sign permutation when ties remain among at most 13, else the normal
    approximation. When every difference is zero, p = 1.
    """
    # Rounded so that equal changes reached by different sums rank as the ties they are.
    diffs = np.round(np.asarray(b, dtype=float) - np.asarray(a, dtype=float), 12)
    nonzero = diffs[diffs != 0]
    if nonzero.size == 0:
        return None, 1.0, "none (every difference is zero)", "every difference is zero"
    ties = np.unique(np.abs(nonzero)).size < nonzero.size
    if not ties and nonzero.size <= EXACT_WILCOXON_MAX:
        method, label = "exact", "exact"
    elif ties and nonzero.size <= PERMUTATION_WILCOXON_MAX:
        method, label = "exact", "exact (all sign permutations, ties)"
    else:
        method, label = "asymptotic", "normal approximation"
    statistic, p = signed_rank(nonzero, method)
    return statistic, p, label, None


def compare_reports(a: Report, b: Report, *, store: ReportStore | None = None,
                    paths: tuple[str | Path | None, str | Path | None] = (None, None)) -> Comparison:
    """Pair runs A (before) and B (after) by record id and test every outcome.

    Records in only one run are left out with a warning; an empty intersection is an
    InputError. ``store``, when given, is searched for a dev run of B's settings, so
    a comparison on the test split can say whether the change was chosen on dev.
    ``paths`` are the report files, for the headers.
    """
    rows_a = {row.id: row for row in a.rows}
    rows_b = {row.id: row for row in b.rows}
    shared = [rid for rid in rows_a if rid in rows_b]
    if not shared:
        raise InputError(
            f"runs {a.run_id} and {b.run_id} have no record in common",
            hint="compare two runs of the same golden set and split",
        )
    only_a = [rid for rid in rows_a if rid not in rows_b]
    only_b = [rid for rid in rows_b if rid not in rows_a]
    pairs = [(rows_a[rid], rows_b[rid]) for rid in shared]
    changed = [name for name in ("corpus", "model", "config", "code")
               if a.fingerprints.get(name) != b.fingerprints.get(name)]
    warnings = _warnings(a, b, pairs, only_a, only_b, changed, store)
    settings = setting_changes(a, b)
    if "config" in changed and not settings:
        warnings.append("the config fingerprints differ but no stored setting does: a value the reports hide "
                        "(a URL's query value) differs, or the two were written by versions of DocPilot that "
                        "fingerprint the configuration differently")
    values = outcome_scores(a.rows), outcome_scores(b.rows)  # a record's samples read as their mean
    tests = [
        paired_test(outcome, pairs, gate_only=a.gate_only or b.gate_only,
                    scores=(values[0][outcome.name], values[1][outcome.name]))
        for outcome in OUTCOMES
        if any(outcome.includes(x) or outcome.includes(y) for x, y in pairs)
    ]
    return Comparison(
        a=header_of(a, paths[0]).describe(), b=header_of(b, paths[1]).describe(), records=len(shared),
        only_a=only_a, only_b=only_b, changed=changed, warnings=warnings, tests=tests,
        settings=settings, pages=page_changes(a, b) if "corpus" in changed else None,
    )


def outcome_scores(rows: Sequence[Row], ahead: OutcomesAhead | None = None) -> dict[str, dict[str, float]]:
    """Each outcome's value for every record that has it, by outcome name and record id (``ahead``'s where it has them).

    A record with several samples (``--repeat``) gets their mean: for a 0/1 outcome, its
    pass rate over the samples. The paired tests then pair records, never samples, which
    are not independent of one another (docs/repeats.md#compare).
    """
    known = ahead._values if ahead is not None else {}
    held = ahead._rows if ahead is not None else {}
    scores: dict[str, dict[str, float]] = {}
    for outcome in OUTCOMES:
        before = known.get(outcome.name, {})
        samples: dict[str, list[float]] = {}
        for row in rows:
            if (key := id(row)) in before and held.get(key) is row:
                samples.setdefault(row.id, []).append(before[key])
            elif outcome.includes(row):
                samples.setdefault(row.id, []).append(outcome.score(row))
        scores[outcome.name] = {record: values[0] if len(values) == 1 else math.fsum(values) / len(values)
                                for record, values in samples.items()}
    return scores


class OutcomesAhead:
    """Rows' outcome values worked out as each shard is scored, while the model still answers later ones.

    As ``metrics.summary.Ahead`` does for the summary: a value is used only for the very
    row object it came from (``outcome_scores``); a copy is worked out afresh.
    """

    def __init__(self) -> None:
        self._rows: dict[int, Row] = {}
        self._values: dict[str, dict[int, float]] = {}

    def add(self, rows: Sequence[Row]) -> None:
        """Work out the outcomes of these scored rows now."""
        for outcome in OUTCOMES:
            values = self._values.setdefault(outcome.name, {})
            for row in rows:
                if outcome.includes(row):
                    values[id(row)] = outcome.score(row)
        for row in rows:
            self._rows[id(row)] = row


def paired_test(outcome: Outcome, pairs: list[tuple[Row, Row]], *, gate_only: bool,
                scores: tuple[Mapping[str, float], Mapping[str, float]] | None = None) -> PairedTest:
    """One outcome tested on record pairs (A, B): McNemar or Wilcoxon, direction at ``ALPHA`` uncorrected.

    ``scores`` holds A's and B's values of the outcome by row id, worked out already
    (``outcome_scores``); by default they are worked out here.
    """
    empty = {"n": 0, "mean_a": None, "mean_b": None, "effect": None, "p_value": None,
             "method": None, "direction": "none"}
    if outcome.needs_model and gate_only:
        return PairedTest(outcome=outcome.name, test=outcome.test, **empty,
                          note="a gate-only run called no model")
    kept = [(x, y) for x, y in pairs if outcome.includes(x) and outcome.includes(y)]
    if not kept:
        return PairedTest(outcome=outcome.name, test=outcome.test, **empty,
                          note="no record has this outcome in both runs")
    ids = [x.id for x, _ in kept]
    if scores is None:
        va = [outcome.score(x) for x, _ in kept]
        vb = [outcome.score(y) for _, y in kept]
    else:
        va = [scores[0][x.id] for x, _ in kept]
        vb = [scores[1][y.id] for _, y in kept]
    mean_a, mean_b = sum(va) / len(va), sum(vb) / len(vb)
    effect = mean_b - mean_a
    dropped = sum(1 for x, y in pairs if outcome.includes(x) != outcome.includes(y))
    note = f"{dropped} record(s) left out: they have this outcome in one run only" if dropped else None
    flips = [Flip(id=i, a=x, b=y) for i, x, y in zip(ids, va, vb, strict=True) if abs(y - x) > _ZERO]
    better = sorted((f for f in flips if f.b > f.a), key=lambda f: f.a - f.b)
    worse = sorted((f for f in flips if f.b < f.a), key=lambda f: f.b - f.a)
    fields: dict[str, object]
    test = outcome.test
    if test == "mcnemar" and any(v not in (0.0, 1.0) for v in (*va, *vb)):
        test = "wilcoxon"  # a recall@8 of 0.5: a record with two gold entries found one
    if test == "mcnemar":
        count_b, count_c, p, why = mcnemar(va, vb)
        fields = {"b": count_b, "c": count_c, "method": "exact binomial"}
    else:
        statistic, p, method, why = wilcoxon(va, vb)
        fields = {"statistic": statistic, "method": method}
    direction = "none"
    if p < ALPHA and abs(effect) > _ZERO:
        direction = "better" if effect > 0 else "worse"
    detectable = None if direction != "none" else detectable_change(test, va, vb)
    if detectable is not None:
        note = describe_detectable(detectable, len(kept)) + (f"; {note}" if note else "")
    return PairedTest(
        outcome=outcome.name, test=test, n=len(kept), mean_a=mean_a, mean_b=mean_b,
        effect=effect, p_value=p, direction=direction, better=better, worse=worse,
        note="; ".join(x for x in (why, note) if x) or None, detectable=detectable, **fields,
    )


def detectable_change(test: str, a: Sequence[float], b: Sequence[float]) -> float | None:
    """The smallest change in the outcome's mean ``test`` would call on these pairs (``metrics.power``).

    McNemar reads the discordance, the share of records that flipped; Wilcoxon the
    standard deviation of the differences B − A (none with fewer than two pairs, or when
    every difference is the same).
    """
    from docpilot.metrics.power import mcnemar_detectable, wilcoxon_detectable

    n = len(a)
    if test == "mcnemar":
        flipped = sum(1 for x, y in zip(a, b, strict=True) if x != y)
        return mcnemar_detectable(n, flipped / n) if n else None
    spread = float(np.std(np.asarray(b, float) - np.asarray(a, float), ddof=1)) if n > 1 else 0.0
    return wilcoxon_detectable(n, spread) if spread > _ZERO else None  # nothing moved: no spread to read


def describe_detectable(change: float, n: int) -> str:
    """What a "no evidence" can say: the change the test would have called, in words."""
    return (f"no significant difference; over these {n} records the test would call a change of "
            f"±{change:.3f} or more (α {ALPHA:g}, power 0.8)")


def _warnings(a: Report, b: Report, pairs: list[tuple[Row, Row]], only_a: list[str],
              only_b: list[str], changed: list[str], store: ReportStore | None) -> list[str]:
    found = [f"not comparable: {reason}" for reason in differences(a, b)]
    if only_a or only_b:
        found.append(
            f"the runs hold different records ({len(only_a)} only in A, {len(only_b)} only in B); "
            f"comparing the {len(pairs)} they share"
        )
    if not changed:
        found.append("A and B ran the same corpus, model, config and code: any difference is noise")
    on_test = sum(1 for x, _ in pairs if x.split == "test")
    if on_test:
        found.append(
            f"{on_test} of the {len(pairs)} records are from the test split: prove on test, choose on dev. "
            "This p-value holds only if the change was chosen without looking at test results"
        )
        if changed and store is not None and not has_dev_run(store, b):
            found.append(
                f"no dev-split run of B's settings is in {store.root}: run `docpilot eval --split dev` "
                "with them and choose there before proving on test"
            )
    return found


def has_dev_run(store: ReportStore, report: Report) -> bool:
    """Whether the store holds a dev-split run with ``report``'s corpus, model and config."""
    keys = ("corpus", "model", "config")
    wanted = [report.fingerprints.get(k) for k in keys]
    return any(
        header.split == "dev" and [header.fingerprints.get(k) for k in keys] == wanted
        for header in store
    )


def describe_move(a: float, b: float, places: int = 2) -> str:
    """``a→b`` with the fewest decimals (from ``places``, at most 6) that show the two apart: 0.118→0.124, not 0.12→0.12."""
    while places < 6 and f"{a:.{places}f}" == f"{b:.{places}f}":
        places += 1
    return f"{a:.{places}f}→{b:.{places}f}"


def describe_effect(effect: float, places: int = 3) -> str:
    """A mean difference with the decimals that show it is not zero (+0.0004, not +0.000)."""
    while places < 6 and effect and f"{abs(effect):.{places}f}" == f"{0:.{places}f}":
        places += 1
    return f"{effect:+.{places}f}"


def describe_p(p: float | None) -> str:
    """A p-value as the tables show it."""
    if p is None or math.isnan(p):
        return "n/a"
    return f"{p:.3g}" if p >= 0.001 else "<0.001"

