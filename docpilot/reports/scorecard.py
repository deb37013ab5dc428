"""The scorecard printed at the end of a run: each number with its n, the gates, the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.reports.terminal import clean
from docpilot.schema import Report

_COUNTS = {"hallucinated_citations", "scope_violations", "unlinked_answers", "unlinked_negatives", "errors"}
_BOUNDS = {"over_refusal_gate": "over_refusal_gate_upper95", "over_refusal_answer": "over_refusal_answer_upper95"}


def format_value(metric: str, value: float | int | None) -> str:
    """A metric value as the scorecard shows it: n/a for null, ms for times, counts as integers."""
    if value is None:
        return "n/a"
    if metric in _COUNTS:
        return str(int(value))
    if metric.startswith(("latency_", "first_token_", "stage_")):
        return f"{value:,.0f} ms" if value >= 10 else f"{value:.2f} ms"
    return f"{value:.3f}"


def render_scorecard(report: Report, console: Console, *, path: str | None = None) -> None:
    """Print the report's summary, gates and verdict."""
    table = Table(title=f"DocPilot scorecard — {report.split} split, {len(report.rows)} records", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("n", justify="right")
    table.add_column("note")
    for metric, value in report.summary.items():
        if metric in _BOUNDS.values():
            continue
        note = ""
        if metric in _BOUNDS and report.summary.get(_BOUNDS[metric]) is not None:
            note = f"≤ {report.summary[_BOUNDS[metric]]:.3f} at 95 %"
        n = report.counts.get(metric)
        table.add_row(metric, format_value(metric, value), "" if n is None else str(n), note)
    console.print(table)
    for gate in report.gates:
        mark = "[green]pass[/]" if gate.passed else "[red]FAIL[/]"
        value = format_value(gate.metric, gate.value)
        line = f"  {mark}  {gate.metric} {gate.op} {gate.threshold:g}  (value {value})"
        if gate.records and not gate.passed:
            shown = ", ".join(gate.records[:10]) + (" …" if len(gate.records) > 10 else "")
            line += f"  records: {escape(clean(shown))}"  # ids come from the golden file: no markup, no escapes
        console.print(line, highlight=False)
    if report.leaks:
        probes = len({leak.record for leak in report.leaks})
        console.print(f"leaks ({probes} probes):", highlight=False)
        for leak in report.leaks:
            # markup=False: leaked text may hold [brackets] that rich would read as markup.
            console.print(clean(f"  {leak.record}: {leak.text[:120]!r} in the {leak.where} "
                                f"(forbidden {leak.forbidden!r})"),
                          markup=False, highlight=False)
    colour = "green" if report.verdict == "pass" else "red"
    mode = "gate-only, " if report.gate_only else ""
    console.print(
        f"verdict: [bold {colour}]{report.verdict}[/]  ({mode}orchestrator {report.orchestrator}, "
        f"{report.wall_ms or 0:,.0f} ms)",
        highlight=False,
    )
    if path:
        console.print(f"report: {path}", highlight=False, soft_wrap=True)
