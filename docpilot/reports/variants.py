"""The report of a run of several variants: joined, re-scored, tested pair by pair, read one variant at a time.

A run of several variants is one report: every row carries its ``variant``, and
``variants`` holds each one's summary, gates and verdict, the baseline (the first)
first. ``paired`` tests every variant against the baseline on every outcome
``improve compare`` tests (McNemar on pass/fail outcomes, Wilcoxon signed-rank on
per-record scores), with the p-values corrected for the number of tests by Holm's
method, so "significantly better" holds for the whole table at once, not for one cell.

Everything here is a function of the rows: ``rescore_variants`` recomputes each
variant's numbers and the paired verdict from them, as ``docpilot score`` does for a
run of one. ``one_variant`` gives a variant as a report of one run, so every reader of
reports (``status``, ``improve``, the readouts) can read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from docpilot.config.variants import Variant
from docpilot.errors import InputError
from docpilot.reports.compare import ALPHA, OUTCOMES, outcome_scores, paired_test
from docpilot.reports.report import cache_stats, new_run_id, now_iso, score
from docpilot.reports.stats import holm
from docpilot.schema import (
    VARIANTS_SCHEMA_VERSION,
    PairedVerdict,
    Report,
    Row,
    VariantResult,
    VariantTest,
)

_ZERO = 1e-12  # differences this small are rounding, not change

COST_FIGURES = ("cost_usd", "tokens", "latency_p50")
"""What "cheapest" is read by, first available for every variant first."""


def join_variants(parts: Sequence[tuple[Variant, Report]], *, gate_variant: str | None = None,
                  wall_ms: float | None = None, ranked_here: Mapping[str, set[str]] | None = None,
                  scores: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None) -> Report:
    """One report of the variants' reports (``(Variant, Report)`` pairs, baseline first).

    ``ranked_here`` names, per variant, the records whose rankings were computed for it
    by the variant that ranks a shared setting (``run.variants.SharedRanking``): its rows count them as
    computed, not as reused from the cache. ``scores`` are variants' outcome values
    worked out already, as ``paired_verdict`` takes them.
    """
    ranked_here = ranked_here or {}
    rows: list[Row] = []
    results: list[VariantResult] = []
    for variant, report in parts:
        name = variant.name
        fresh = ranked_here.get(name, set())
        own = [row.model_copy(update={"variant": name,
                                      "cached": [c for c in row.cached if not (c == "retrieve" and row.id in fresh)]})
               for row in report.rows]
        rows += own
        results.append(VariantResult(
            name=name, overrides=dict(variant.overrides),
            config=report.config, fingerprints={k: v for k, v in report.fingerprints.items() if k in ("model", "config")},
            cache_stats=cache_stats(own, gate_only=report.gate_only, runtime=report.runtime),
            summary=report.summary, counts=report.counts, slices=report.slices, bands=report.bands,
            turns=report.turns, replayed=report.replayed,
            gates=report.gates, verdict=report.verdict, leaks=report.leaks,
            intervals=report.intervals, stability=report.stability,
        ))
    base = parts[0][1]
    paired = paired_verdict(rows, [r.name for r in results], {r.name: r.summary for r in results},
                            gate_only=base.gate_only, gate_variant=gate_variant, scores=scores)
    first = results[0]
    return base.model_copy(update={
        "schema_version": VARIANTS_SCHEMA_VERSION, "run_id": new_run_id(), "created_at": now_iso(),
        "rows": rows, "variants": results, "paired": paired, "verdict": overall_verdict(results, gate_variant),
        "cache_stats": first.cache_stats, "wall_ms": round(wall_ms, 1) if wall_ms is not None else base.wall_ms,
        "command_ms": max((r.command_ms or 0.0) for _, r in parts) or None,
    })


def overall_verdict(results: Sequence[VariantResult], gate_variant: str | None) -> str:
    """`fail` when a gate of any variant failed, or only ``gate_variant``'s when one is named."""
    read = [r for r in results if gate_variant is None or r.name == gate_variant]
    return "fail" if any(r.verdict == "fail" for r in read) else "pass"


def rows_by_variant(rows: Sequence[Row], names: Sequence[str]) -> dict[str, list[Row]]:
    """The rows of each variant, in run order."""
    grouped: dict[str, list[Row]] = {name: [] for name in names}
    for row in rows:
        grouped.setdefault(row.variant or "", []).append(row)
    return grouped


def paired_verdict(rows: Sequence[Row], names: Sequence[str], summaries: Mapping[str, Mapping],
                   *, gate_only: bool, gate_variant: str | None = None, alpha: float = ALPHA,
                   scores: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None) -> PairedVerdict:
    """Every variant against the first on every outcome, Holm-corrected over all the tests at once.

    Each variant's outcome values are worked out once (``compare.outcome_scores``), or
    taken from ``scores`` (by variant, outcome and record id) when its processes did it.

    A comparison where no record differs between the two (three variants that share
    retrieval have the same ``recall@8`` on every record) is no test: it is listed with
    its note, but it is not counted in the correction, which would only grow by it.
    """
    grouped = rows_by_variant(rows, names)
    values = {name: (scores or {}).get(name) or outcome_scores(grouped[name]) for name in names}
    baseline = names[0]
    base = {row.id: row for row in grouped[baseline]}
    raw = []
    for name in names[1:]:
        other = {row.id: row for row in grouped[name]}
        pairs = [(base[i], other[i]) for i in base if i in other]
        for outcome in OUTCOMES:
            if any(outcome.includes(x) or outcome.includes(y) for x, y in pairs):
                raw.append((name, paired_test(outcome, pairs, gate_only=gate_only,
                                              scores=(values[baseline][outcome.name], values[name][outcome.name]))))
    tested = [i for i, (_, t) in enumerate(raw) if t.p_value is not None and (t.better or t.worse)]
    corrected = dict(zip(tested, holm([raw[i][1].p_value for i in tested]), strict=True))
    tests, better, worse = [], {}, {}
    for index, (name, test) in enumerate(raw):
        p_holm = corrected.get(index)
        direction = "none"
        if p_holm is not None and p_holm < alpha and test.effect is not None and abs(test.effect) > _ZERO:
            direction = "better" if test.effect > 0 else "worse"
            (better if direction == "better" else worse).setdefault(test.outcome, []).append(name)
        note = test.note
        if p_holm is None and test.p_value is not None:
            note = "no record differs: not a test, not counted in the correction"
        tests.append(VariantTest(
            variant=name, outcome=test.outcome, test=test.test, n=test.n, baseline=test.mean_a, value=test.mean_b,
            effect=test.effect, better=len(test.better), worse=len(test.worse), p_value=test.p_value,
            p_holm=p_holm, direction=direction, note=note,
            detectable=test.detectable if direction == "none" else None,
        ))
    losing = {name for names_ in worse.values() for name in names_}
    not_worse = [name for name in names if name not in losing]
    cheapest, by = cheapest_of(not_worse, summaries)
    return PairedVerdict(baseline=baseline, alpha=alpha, tests=tests, better=better, worse=worse,
                         not_worse=not_worse, cheapest_not_worse=cheapest, cheapest_by=by, gate_variant=gate_variant)


def cost_of(summary: Mapping, figure: str) -> float | None:
    """A variant's cost by ``figure``: dollars or tokens of all its turns (cached ones at what they cost), or its
    median latency."""
    if figure == "cost_usd":
        return summary.get("cost_usd")
    if figure == "tokens":
        parts = [summary.get("prompt_tokens"), summary.get("completion_tokens")]
        return None if all(p is None for p in parts) else float(sum(p or 0 for p in parts))
    return summary.get("latency_p50")


def cheapest_of(names: Sequence[str], summaries: Mapping[str, Mapping]) -> tuple[str | None, str | None]:
    """The name that costs least, by the first figure every one of them has (``COST_FIGURES``)."""
    for figure in COST_FIGURES:
        costs = {name: cost_of(summaries[name], figure) for name in names}
        if names and all(cost is not None for cost in costs.values()):
            if figure != "latency_p50" and not any(costs.values()):
                continue  # nothing spent by anyone (an offline model): cheapest by time instead
            return min(names, key=lambda n: costs[n]), figure
    return None, None


def rescore_variants(report: Report) -> Report:
    """A report of several variants with every variant's numbers and the paired verdict recomputed from its rows."""
    from docpilot.metrics.slices import slice_by_overlap, slice_by_tag, slice_by_turn
    from docpilot.metrics.summary import replayed_counts
    from docpilot.reports.report import headline_intervals, leaks_of, stability_of

    names = [v.name for v in report.variants or []]
    grouped = rows_by_variant(report.rows, names)
    stray = [name for name in grouped if name not in names]
    if stray:
        raise InputError(f"rows name variant {stray[0]!r}, which the report's variants do not list",
                         hint="run `docpilot eval` again instead of editing the report")
    conditions = report.config.get("gates", {}) or {}
    results = []
    for result in report.variants or []:
        own = grouped[result.name]
        summary, counts, gates, outcome = score(own, conditions, gate_only=report.gate_only,
                                                allow_errors=report.allow_errors, record_set=report.set)
        results.append(result.model_copy(update={
            "summary": summary, "counts": counts, "gates": gates, "verdict": outcome, "leaks": leaks_of(own),
            "slices": slice_by_tag(own, gate_only=report.gate_only),
            "bands": slice_by_overlap(own, gate_only=report.gate_only),
            "turns": slice_by_turn(own, gate_only=report.gate_only),
            "replayed": replayed_counts(own, gate_only=report.gate_only),
            "stability": stability_of(own), "intervals": headline_intervals(own, gate_only=report.gate_only)}))
    gate_variant = report.paired.gate_variant if report.paired else None
    paired = paired_verdict(report.rows, names, {r.name: r.summary for r in results}, gate_only=report.gate_only,
                            gate_variant=gate_variant)
    first = results[0]
    return report.model_copy(update={
        "variants": results, "paired": paired, "verdict": overall_verdict(results, gate_variant),
        "summary": first.summary, "counts": first.counts, "gates": first.gates, "slices": first.slices,
        "bands": first.bands, "turns": first.turns, "replayed": first.replayed, "leaks": first.leaks,
        "stability": first.stability, "intervals": first.intervals,
    })


def variant_names(report: Report) -> list[str]:
    """The report's variants, baseline first; empty for a run of one."""
    return [v.name for v in report.variants or []]


def one_variant(report: Report, name: str | None = None, *, path: object = None) -> Report:
    """The variant ``name`` of a report (the baseline when None) as the report of a run of one.

    A report of one run is given back as it is; naming a variant it does not have is an InputError.
    """
    where = f"{path}: " if path is not None else ""
    if not report.variants:
        if name is not None:
            raise InputError(f"{where}run {report.run_id} is a run of one, with no variant {name!r}",
                             hint="drop --variant, or read a report of a run with several variants")
        return report
    names = variant_names(report)
    chosen = name or names[0]
    if chosen not in names:
        raise InputError(f"{where}run {report.run_id} has no variant {chosen!r}",
                         hint=f"its variants: {', '.join(names)}")
    result = next(v for v in report.variants if v.name == chosen)
    return report.model_copy(update={
        "schema_version": 1, "rows": [row for row in report.rows if row.variant == chosen],
        "config": result.config or report.config, "fingerprints": {**report.fingerprints, **result.fingerprints},
        "cache_stats": result.cache_stats, "summary": result.summary, "counts": result.counts,
        "slices": result.slices, "bands": result.bands, "turns": result.turns, "replayed": result.replayed, "gates": result.gates, "verdict": result.verdict,
        "leaks": result.leaks, "stability": result.stability, "intervals": result.intervals,
        "variants": None, "paired": None,
    })
