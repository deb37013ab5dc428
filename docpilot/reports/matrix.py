"""The scorecard of a run of several variants: metrics down, variants across, the paired verdict below.

Each column is a variant's summary, computed as a run of one computes it, with each headline
mean's 95 % interval by page; a variant that asked several samples per record says its
flip rate and names its flaky records under the tests. The tests
under the table pair every variant with the baseline record by record (Holm-corrected
p-values, ``reports.variants``), and the last lines answer the question a comparison
is run for: which variants are no worse than the baseline, and which of those costs least.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.reports.compare import describe_p
from docpilot.reports.scorecard import format_gate_value, format_value, shown_metrics, with_interval
from docpilot.reports.stability import flaky_lines, stability_line
from docpilot.reports.terminal import clean
from docpilot.schema import Report

COST_ROWS = ("prompt_tokens", "completion_tokens", "cost_usd", "first_token_p50", "latency_p50", "latency_p95")
"""The cost and time rows under the quality ones, where the run has them."""

_MARK = {"better": "▲", "worse": "▼", "none": ""}


def render_matrix(report: Report, console: Console, *, path: str | None = None,
                  command_ms: float | None = None) -> None:
    """Print the metrics × variants table, the paired tests against the baseline, each variant's gates and the verdict."""
    variants = report.variants or []
    baseline = variants[0].name
    table, left_off = _scorecard_table(report, baseline)
    console.print(table)
    if left_off:
        console.print(left_off, highlight=False, markup=False, soft_wrap=True)
    _render_tests(report, console)
    _render_stability(report, console)
    for variant in variants:
        for gate in variant.gates:
            if not gate.passed:
                console.print(f"  [red]FAIL[/]  {escape(variant.name)}: {gate.metric} {gate.op} {gate.threshold:g}  "
                              f"(value {format_gate_value(gate)})", highlight=False)
    paired = report.paired
    if paired is not None:
        cheapest = (f"; cheapest of them by {paired.cheapest_by}: {paired.cheapest_not_worse}"
                    if paired.cheapest_not_worse else "")
        console.print(f"no worse than {baseline} on any outcome: {', '.join(paired.not_worse)}{cheapest}",
                      highlight=False, markup=False, soft_wrap=True)
    colour = "green" if report.verdict == "pass" else "red"
    read = f"gates of {paired.gate_variant} only" if paired and paired.gate_variant else "gates of every variant"
    command = command_ms if command_ms is not None else report.command_ms
    took = f"stages {report.wall_ms or 0:,.0f} ms" + (f", command {command:,.0f} ms" if command is not None else "")
    console.print(f"verdict: [bold {colour}]{report.verdict}[/]  ({read}; orchestrator {report.orchestrator}, {took})",
                  highlight=False)
    if path:
        console.print(f"report: {path}", highlight=False, soft_wrap=True, markup=False)


def _scorecard_table(report: Report, baseline: str) -> tuple[Table, str]:
    """The metrics × variants table, quality rows above the cost and time ones, and the note on metrics left off it."""
    variants = report.variants or []
    names = [v.name for v in variants]
    records = len({row.id for row in report.rows})  # a record's samples are one record
    table = Table(title=f"DocPilot scorecard — {len(variants)} variants × {records} "
                        f"records, {report.split} split; baseline {baseline}", title_justify="left")
    table.add_column("metric")
    for name in names:
        table.add_column(escape(name), justify="right")
    shown, left_off = shown_metrics(report, report.summary)
    for metric in report.summary:
        if metric not in shown or metric in COST_ROWS or metric.endswith(("_upper95", "_cached")):
            continue
        if metric in ("prompt_tokens", "completion_tokens", "cost_usd"):
            continue
        table.add_row(metric, *(with_interval(metric, v.summary.get(metric), v.intervals) for v in variants))
    table.add_section()
    for metric in COST_ROWS:
        values = [v.summary.get(metric) for v in variants]
        if any(value is not None for value in values):
            table.add_row(metric, *(format_value(metric, value) for value in values))
    table.add_row("verdict", *(("[green]pass[/]" if v.verdict == "pass" else "[red]FAIL[/]") for v in variants))
    return table, left_off


def _render_stability(report: Report, console: Console) -> None:
    """Each variant that asked several samples per record: its flip rate and pass^k, and its flaky records."""
    for variant in report.variants or []:
        line = stability_line(variant)
        if line is None:
            continue
        # markup=False, clean: variant names come from the config, record ids from the golden file.
        console.print(clean(f"{variant.name}: {line}"), highlight=False, markup=False, soft_wrap=True)
        for flaky in flaky_lines(variant):
            console.print(clean(f"  {flaky}"), highlight=False, markup=False, soft_wrap=True)


def _render_tests(report: Report, console: Console) -> None:
    """Each outcome × variant against the baseline: the change, and its Holm-corrected p-value."""
    paired = report.paired
    if paired is None or not paired.tests:
        return
    others = [v.name for v in report.variants or []][1:]
    table = Table(title=f"paired against {paired.baseline} (Holm-corrected p; ▲ better, ▼ worse at "
                        f"{paired.alpha:g})", title_justify="left")
    table.add_column("outcome")
    table.add_column("test")
    for name in others:
        table.add_column(escape(name), justify="right")
    outcomes = list(dict.fromkeys(t.outcome for t in paired.tests))
    for outcome in outcomes:
        cells, test_name = [], ""
        for name in others:
            test = next((t for t in paired.tests if t.variant == name and t.outcome == outcome), None)
            if test is None or test.effect is None:
                cells.append("n/a")
                continue
            test_name = test.test
            p = "same" if test.p_holm is None else f"p {describe_p(test.p_holm)}"
            seen = f", could see ±{test.detectable:.3f}" if test.detectable is not None else ""  # no evidence
            cells.append(f"{_MARK[test.direction]}{test.effect:+.3f} ({p}{seen})")
        table.add_row(outcome, test_name, *cells)
    console.print(table)
