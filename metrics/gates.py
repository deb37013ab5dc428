"""Gates: the thresholds a run must meet, and the pass/fail verdict they give.

Three gates always hold for a full run, because each counts a defect a reader would
see: a citation to a source that was never retrieved, a section from outside the
turn's scope, an answer shown with Sources but no working link. The user adds
conditions on any metric (``recall@8: ">= 0.8"``). A gate on a metric with nothing
to measure fails: a run cannot pass on a number it did not produce.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from docpilot.metrics.aggregate import mean
from docpilot.metrics.refusals import wilson_upper95
from docpilot.metrics.registry import RETRIEVAL_METRICS, Metric, get
from docpilot.metrics.stability import RULES, Rule

from docpilot.errors import InputError
from docpilot.schema import GateResult, Row

BUILTIN_GATES: tuple[str, ...] = (
    "hallucinated_citations",
    "scope_violations",
    "unlinked_answers",
    "errors",
)
"""Metrics that must be 0 in every run that called the model (`errors` unless allowed)."""

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}
_CONDITION = re.compile(
    r"^\s*(?P<op>>=|<=|==|>|<)\s*(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
_FORMS = "'>= 0.8', '> 0.5', '<= 4000', '< 0.1' or '== 0'"


def parse_condition(text: str, *, metric: str | None = None) -> tuple[str, float]:
    """Split a condition such as ``">= 0.8"`` into its operator and threshold.

    The operator is one of ``>=``, ``>``, ``<=``, ``<``, ``==``; the threshold a
    decimal number. ``metric`` only names the gate in the error message.
    """
    match = _CONDITION.match(text) if isinstance(text, str) else None
    where = f"gate on {metric!r}: " if metric else ""
    if match is None:
        raise InputError(
            f"{where}cannot read the condition {text!r}",
            hint=f"write an operator and a number, e.g. {_FORMS}",
        )
    threshold = float(match["number"])
    if not math.isfinite(threshold):  # `1e999` is written like a number and read as infinity
        raise InputError(f"{where}the threshold of {text!r} is not a finite number",
                         hint=f"write a threshold the metric can reach, e.g. {_FORMS}")
    return match["op"], threshold


def metric_bounds(metric: Metric) -> tuple[float, float | None]:
    """The values ``metric`` can take: a share (a mean of 0/1-bounded scores, a Wilson bound)
    lies from 0 to 1; counts, times, tokens and dollars are 0 or more (None: no upper bound)."""
    return 0.0, 1.0 if metric.aggregate in (mean, wilson_upper95) else None


RULE_KEY = "rule"
"""The key of ``gates:`` that says how a gate reads a record's samples (``mean``, ``majority``, ``all``),
not a metric: ``gates: {rule: majority, refusal_accuracy: ">= 0.9"}``."""


def gate_rule(conditions: Mapping[str, str]) -> Rule:
    """How the gates read a record's samples (``metrics.stability``): the conditions' ``rule``, else ``mean``;
    InputError for a rule that is not one of them."""
    rule = conditions.get(RULE_KEY, RULES[0])
    if rule not in RULES:
        raise InputError(f"gates: {RULE_KEY} {rule!r} is not a rule for reading a record's samples",
                         hint=f"write one of {', '.join(RULES)} (docs/repeats.md)")
    return rule  # type: ignore[return-value]


def check_condition(name: str, text: str) -> tuple[str, float] | None:
    """The operator and threshold of the gate ``name: text``; InputError for an unknown metric,
    an unreadable condition, or a threshold outside the values the metric can take.

    ``recall@8: ">= 80"`` (a percentage for a share) would fail every run, and
    ``latency_p95: "> -1"`` pass every run, without either saying why. ``rule`` is no
    gate: its value is checked (``gate_rule``) and None returned.
    """
    if name == RULE_KEY:
        gate_rule({RULE_KEY: text})
        return None
    metric = get(name)
    op, threshold = parse_condition(text, metric=name)
    low, high = metric_bounds(metric)
    if threshold < low or (high is not None and threshold > high):
        span = f"from {low:g} to {high:g}" if high is not None else f"{low:g} or more"
        guess = f"; did you mean {threshold / 100:g}?" if high == 1.0 and 1 < threshold <= 100 else ""
        raise InputError(f"gate on {name!r}: the threshold {threshold:g} is outside the metric's values, {span}",
                         hint=f"write a threshold {span}{guess}")
    return op, threshold


SAME_WITHIN = 1e-9
"""Relative distance under which a value counts as equal to its threshold."""


def holds(op: str, value: float, threshold: float) -> bool:
    """Whether ``value op threshold`` holds, a value a rounding away from the threshold counting as equal.

    A mean of F1 scores that is 0.25 on paper can come out as 0.24999999999999997 in
    binary floating point; against ``>= 0.25`` it must pass. Values within a relative
    ``SAME_WITHIN`` (or 1e-12 of 0) of the threshold compare as the threshold itself:
    no metric DocPilot reports means anything in its tenth significant digit.
    """
    if math.isclose(value, threshold, rel_tol=SAME_WITHIN, abs_tol=1e-12):
        value = threshold
    return _OPERATORS[op](value, threshold)


MAX_DECIMALS = 17
"""Most decimals ``telling_decimals`` offers: enough to tell any two doubles of a metric's range apart."""


def telling_decimals(op: str, value: float, threshold: float, decimals: int) -> int:
    """The fewest decimals, ``decimals`` or more, at which ``value`` rounded still gets its own verdict.

    A recall of 0.7996 fails ``>= 0.8`` yet prints as 0.800 at three decimals, which
    reads as a pass; at four it is 0.7996, below the threshold, as the verdict says. A
    value already shown on the right side of its threshold keeps ``decimals``.
    """
    verdict = holds(op, value, threshold)
    for places in range(decimals, MAX_DECIMALS + 1):
        if holds(op, round(value, places), threshold) == verdict:
            return places
    return MAX_DECIMALS


def check_gates(
    summary: Mapping[str, float | int | None],
    rows: Sequence[Row],
    conditions: Mapping[str, str],
    *,
    gate_only: bool = False,
    allow_errors: bool = False,
    record_set: Literal["golden", "adversarial"] = "golden",
) -> list[GateResult]:
    """Every gate of the run, built-in ones first, then the user's in the order given.

    A user condition on a metric the record set cannot produce is left out: attack
    metrics in a golden run, question metrics in an attack run. So one config can hold
    gates for both, and each run is judged on the numbers it makes.

    ``allow_errors`` drops the built-in gate on errored records (``--allow-errors``).

    ``conditions`` may hold ``rule`` (``RULE_KEY``), which is no gate: the caller
    summarises the rows by it before (``docpilot.reports.report.score``).

    A run without a model (``gate_only``) has only retrieval numbers, so the built-in
    gates and any user condition on a non-retrieval metric are left out rather than
    failed. An unknown metric id or an unreadable condition is an InputError.
    """
    gates = []
    if not gate_only:
        builtin = [name for name in BUILTIN_GATES if not (allow_errors and name == "errors")]
        gates = [_check(get(name), "==", 0.0, summary, rows) for name in builtin]
    for name, text in conditions.items():
        if name == RULE_KEY:
            continue
        metric = get(name)
        op, threshold = parse_condition(text, metric=name)
        if gate_only and name not in RETRIEVAL_METRICS:
            continue
        if not _applies(metric, record_set):
            continue
        gates.append(_check(metric, op, threshold, summary, rows))
    return gates


def _applies(metric: Metric, record_set: str) -> bool:
    if metric.family == "attacks":
        return record_set == "adversarial"
    if metric.family in ("retrieval", "answer", "citations", "refusals"):
        return record_set == "golden" or metric.id == "errors"
    return True  # latency and stage timings, measured in every run


def verdict(gates: Sequence[GateResult]) -> Literal["pass", "fail"]:
    """``"fail"`` when any gate failed, else ``"pass"`` (also with no gates at all)."""
    return "pass" if all(gate.passed for gate in gates) else "fail"


def _check(
    metric: Metric,
    op: str,
    threshold: float,
    summary: Mapping[str, float | int | None],
    rows: Sequence[Row],
) -> GateResult:
    value = summary.get(metric.id)
    passed = value is not None and holds(op, value, threshold)
    records: list[str] = []
    if not passed and metric.counts_records:
        records = [
            row.id for row in rows if metric.population.includes(row) and metric.score(row) > 0
        ]
    return GateResult(
        metric=metric.id,
        op=op,
        threshold=threshold,
        value=None if value is None else float(value),
        passed=passed,
        records=records,
    )
