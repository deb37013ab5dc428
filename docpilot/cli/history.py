"""`docpilot history [METRIC...]`: each metric across the comparable runs, its moves and what changed at each."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.cli.status import reports_folder, warn
from docpilot.reports.terminal import clean

_MARKS = {"better": "+", "worse": "−"}
_LEGEND = ("under each trend: + a move for the better, − for the worse, * a move of a metric whose direction this "
           "version does not know; a move is a change beyond the noise floor `docpilot status` uses")


class _Since(click.ParamType):
    """An ISO 8601 date or time; a time without a zone is read as UTC."""

    name = "date"

    def convert(self, value, param, ctx) -> str:
        try:
            moment = datetime.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a date; give one as YYYY-MM-DD or YYYY-MM-DDTHH:MM", param, ctx)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="seconds")


@main.command("history")
@click.argument("metrics", nargs=-1, metavar="[METRIC...]")
@click.option("--last", "last", type=click.IntRange(min=1), default=30, show_default=True,
              help="Show the last N runs of the series.")
@click.option("--since", type=_Since(), help="Show the runs made at or after DATE (YYYY-MM-DD, UTC).")
@click.option("--drift-back", type=click.IntRange(min=1), default=7, show_default=True,
              help="Test the latest run for drift against the run N runs back.")
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
              help="Folder of reports (default: reports_dir from the config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the history as Markdown.")
@handle_errors
def history_command(metrics, last, since, drift_back, reports_dir, config_path, as_json, as_markdown):
    """Show each metric across the runs comparable with the latest one, and what changed where one moved.

    The series is the runs that share the latest run's golden set (its fingerprint),
    record set, split, selection, --gate-only and runtime: a changed golden set starts
    a new series. METRIC names summary metrics (default: the headline ones). A move is
    a change beyond the metric's noise floor, as `docpilot status` shows it; at each,
    the settings, pages, model and DocPilot version that changed are named as
    `docpilot improve compare` names them. Drift pairs the latest run with the run
    --drift-back runs before it, record by record. Exit status: 0, or 2 when there is
    no readable report or a METRIC is not in the summary.
    """
    from docpilot.history.drift import find_drift
    from docpilot.history.index import RunIndex
    from docpilot.history.timeline import build_timeline, choose_metrics, latest_run

    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown each choose the output; give one of them")
    index = RunIndex(reports_folder(reports_dir, config_path))
    problems = index.refresh()
    warn(problems + index.notes)
    latest = latest_run(index)
    timeline = build_timeline(index, choose_metrics(latest, metrics), last=last, since=since, latest=latest)
    drift = find_drift(index, latest, back=drift_back)
    if as_json:
        click.echo(json.dumps({**timeline.describe(), "drift": drift.describe()}, indent=2))
    elif as_markdown:
        from docpilot.history.markdown import history_markdown

        click.echo(clean(history_markdown(timeline, drift)), nl=False)
    else:
        _render(timeline, drift)


def _render(timeline, drift) -> None:
    from docpilot.history.sparkline import sparkline

    latest, steps = timeline.latest, timeline.steps
    span = f": {steps[0].run.created_at} → {steps[-1].run.created_at}" if steps else ""
    click.echo(clean(f"DocPilot history — {latest.record_set} set, {latest.split} split, {latest.selection}"
                     f"{', gate-only' if latest.gate_only else ''}; {len(steps)} of {timeline.series_runs} "
                     f"comparable runs{span}"))
    width = max([len(m) for m in timeline.metrics] + [6])
    for metric in timeline.metrics:
        values = timeline.values(metric)
        first = steps[0].run.shown.get(metric, "n/a") if steps else "n/a"
        last = steps[-1].run.shown.get(metric, "n/a") if steps else "n/a"
        marks = "".join(_mark(step.moves[metric]) for step in steps)
        count = marks.count("+") + marks.count("−") + marks.count("*")
        click.echo(clean(f"  {metric:<{width}}  {first:>10} → {last:<10}  {sparkline(values)}  "
                         f"{count} move{'s' if count != 1 else ''}"))
        if marks.strip():
            click.echo(f"  {'':<{width}}  {'':>10}   {'':<10}  {marks}")
    moved = [(i, step) for i, step in enumerate(steps, start=1) if step.moved and step.previous is not None]
    if moved:
        click.echo(_LEGEND)
        click.echo("moves:")
    for number, step in moved:
        click.echo(clean(f"  #{number} run {step.run.run_id} ({step.run.created_at}): "
                         + "; ".join(step.moves[metric]["text"] for metric in step.moved)))
        for line in step.cause["lines"] if step.cause else []:
            click.echo(clean(f"      {line}"))
    if not moved and steps:
        click.echo("no metric moved beyond its noise floor in the runs shown")
    warning = drift.warning()
    if warning:
        click.echo(clean(warning))
    elif drift.base is None:
        click.echo(clean(f"drift: {drift.note}"))
    else:
        click.echo(clean(drift.note and f"drift: {drift.note}" or
                         f"drift: none; run {drift.latest.run_id} paired with run {drift.base.run_id}, "
                         f"{drift.back} runs back: no outcome worse at p < 0.05"))
    for note in timeline.notes:
        click.echo(clean(f"note: {note}"))


def _mark(move) -> str:
    if move.get("delta") is None or move.get("direction") in (None, "same"):
        return " "
    return _MARKS.get(move.get("change") or "", "*")
