"""The history of a series as Markdown: for CI summaries, for `docpilot history --markdown` and the Prefect artifact."""

from __future__ import annotations

from pathlib import Path

from docpilot.history.drift import Drift
from docpilot.history.sparkline import sparkline
from docpilot.history.timeline import Timeline


def history_markdown(timeline: Timeline, drift: Drift | None = None) -> str:
    """The series' metrics (first, last, sparkline, moves), each move with its cause, and the drift check."""
    latest = timeline.latest
    steps = timeline.steps
    lines = [f"## DocPilot history — {latest.record_set} set, {latest.split} split, {latest.selection}",
             "",
             f"{len(steps)} of the series' {timeline.series_runs} comparable runs"
             + (f", {steps[0].run.run_id} → {steps[-1].run.run_id}" if steps else ""),
             ""]
    lines += ["| metric | first | last | trend | moves |", "|---|---:|---:|---|---:|"]
    for metric in timeline.metrics:
        values = timeline.values(metric)
        count = sum(1 for step in steps if metric in step.moved)
        first = steps[0].run.shown.get(metric, "n/a") if steps else "n/a"
        last = steps[-1].run.shown.get(metric, "n/a") if steps else "n/a"
        lines.append(f"| `{metric}` | {first} | {last} | `{sparkline(values)}` | {count} |")
    moved = [step for step in steps if step.moved and step.previous is not None]
    lines += ["", "### Moves beyond the noise floor", ""]
    if not moved:
        lines.append("No metric moved beyond its noise floor in the runs shown.")
    for step in moved:
        lines.append(f"- **run {step.run.run_id}** ({step.run.created_at}): "
                     + "; ".join(step.moves[metric]["text"] for metric in step.moved))
        for line in step.cause["lines"] if step.cause else []:
            lines.append(f"  - {line}")
    if drift is not None:
        lines += ["", "### Drift", ""]
        warning = drift.warning()
        if warning:
            lines.append(f"**{warning}**")
        elif drift.base is None:
            lines.append(drift.note or "not checked")
        else:
            lines.append(drift.note or f"no outcome of run {drift.latest.run_id} differs significantly from run "
                                       f"{drift.base.run_id}, {drift.back} runs back (paired tests, p < 0.05)")
    for note in timeline.notes:
        lines += ["", f"_{note}_"]
    return "\n".join(lines) + "\n"


def run_history_markdown(report_path: str | Path) -> str | None:
    """The Markdown history of the series of the run whose report is ``report_path``, from its folder's run index.

    None when the run is not in the index (a report written outside the reports folder).
    """
    from docpilot.history.drift import find_drift
    from docpilot.history.index import RunIndex
    from docpilot.history.timeline import build_timeline, choose_metrics

    path = Path(report_path)
    index = RunIndex(path.parent)
    index.refresh()
    run = next((r for r in reversed(index.runs()) if r.file == path.name), None)
    if run is None:
        return None
    timeline = build_timeline(index, choose_metrics(run, ()), latest=run)
    return history_markdown(timeline, find_drift(index, run))
