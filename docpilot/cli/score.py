"""`docpilot score`."""

from __future__ import annotations

import sys

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.cli._verdict import emit


@main.command("score")
@click.argument("report_path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print summary, gates and verdict as JSON.")
@handle_errors
def score_command(report_path, as_json):
    """Recompute a report's summary, gates and verdict from its rows alone.

    A report whose rows no run could have written (model rows in a gate-only report,
    infinite or negative times, a section listed twice in a row's retrieved) is
    refused with exit 2.
    """
    from docpilot.reports.report import collector_paused

    # The report's rows and what the rescore makes of them hold no reference cycles; they
    # are gone before the collector is on again, so it has nothing of theirs to walk.
    with collector_paused():
        verdict = _scored(report_path, as_json)
    sys.exit(0 if verdict == "pass" else 1)


def _scored(report_path: str, as_json: bool) -> str:
    """Rescore the report, print it, and return its verdict."""
    from docpilot.reports.report import check_consistency, load_report, rescore

    report = check_consistency(load_report(report_path), report_path)
    if report.variants:
        from docpilot.reports.variants import rescore_variants

        report = rescore_variants(report)
    else:
        report = rescore(report)
    emit(report, report_path, as_json)
    return report.verdict
