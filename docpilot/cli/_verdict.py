"""How a report's verdict is shown on the terminal, by `docpilot eval` and `docpilot score` alike."""

from __future__ import annotations

import json

import click


def emit(report, path: str, as_json: bool, *, live: bool = False) -> None:
    """A report's verdict for the terminal: the scorecard (or the variants' matrix), or with ``as_json`` the
    summary, gates, verdict and path as JSON on stdout; faults on stderr either way."""
    if as_json:
        # Errors go to stderr, so the JSON on stdout stays whole; with none, the terminal's renderer is not loaded.
        if any(row.error is not None for row in report.rows):
            from rich.console import Console

            from docpilot.reports.scorecard import render_faults

            render_faults(report, Console(stderr=True))
        payload = {
            "summary": report.summary,
            "gates": [g.model_dump() for g in report.gates],
            "verdict": report.verdict,
            "report": path,
        }
        if report.variants:  # a run of several: each variant's numbers, and the paired verdict
            payload["variants"] = {v.name: {"summary": v.summary, "gates": [g.model_dump() for g in v.gates],
                                            "verdict": v.verdict} for v in report.variants}
            payload["paired"] = report.paired.model_dump() if report.paired else None
        click.echo(json.dumps(payload, indent=2))
        return
    from rich.console import Console

    from docpilot.reports.scorecard import render_faults

    if report.variants:
        from docpilot.clock import command_ms
        from docpilot.reports.matrix import render_matrix

        console = Console()
        render_faults(report, console)
        render_matrix(report, console, path=path, command_ms=command_ms() if live else None)
    else:
        from docpilot.clock import command_ms
        from docpilot.readout.outcomes import failing_ids
        from docpilot.reports.scorecard import render_scorecard

        console = Console()
        render_faults(report, console)
        render_scorecard(report, console, path=path, command_ms=command_ms() if live else None,
                         failing=failing_ids(report))
