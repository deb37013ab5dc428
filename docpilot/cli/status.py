"""`docpilot status`: the last run's scorecard and how each number moved since the last comparable run."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.reports.terminal import clean

_VERDICTS = {"better": "[green]better[/]", "worse": "[red]worse[/]", "same": "= no move"}
_FLOORS = ("a move is shown only beyond its noise floor: one record's worth (1/n) for rates, one for counts, "
           "and for times the larger of 1 ms and 10 % of the earlier value")


def reports_folder(reports_dir: str | None, config_path: str | None) -> str:
    """The reports folder: ``--reports`` when given, else the config's ``reports_dir``."""
    if reports_dir:
        return reports_dir
    from docpilot.config.loading import load_config

    return load_config(config_path).reports_dir


def warn(problems: list[str]) -> None:
    """Print the store's skipped files to stderr, one `warning:` line each."""
    for problem in problems:
        click.echo(clean(f"warning: {problem}"), err=True)  # a problem names files and values found in them


@main.command("status")
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
              help="Folder of reports (default: reports_dir from the config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--json", "as_json", is_flag=True, help="Print the scorecard and its moves as JSON.")
@click.option("--variant", metavar="NAME",
              help="The last run held several variants: show this one (default: the baseline, the first).")
@handle_errors
def status_command(reports_dir, config_path, as_json, variant):
    """Show the last run's scorecard and each metric's move since the last comparable run.

    Runs are comparable when they share the golden set (its fingerprint), the record
    set, the split, the selection (--id, --tag, --limit), --gate-only and the runtime.
    A change smaller than the metric's noise floor (one record's worth for a rate; for
    a time, 1 ms or 10 %, whichever is larger) is shown as no move. Metrics the run's
    record set cannot produce are left out. Exit status: 0, or 2 when there is no
    readable report.
    """
    from docpilot.errors import ReportError
    from docpilot.reports.moves import metric_moves
    from docpilot.reports.store import ReportStore

    store = ReportStore(reports_folder(reports_dir, config_path))
    latest = store.latest()
    if latest is None:
        warn(store.problems)
        raise ReportError(f"{store.root}: no readable report; run `docpilot eval` first, or pass --reports DIR")
    from docpilot.reports.variants import one_variant, variant_names

    previous, skipped = store.previous_comparable(latest)
    current = one_variant(latest.load(), variant, path=latest.path)
    before = previous.load() if previous is not None else None
    if before is not None and before.variants:  # the same variant of an earlier run of several, or its baseline
        before = one_variant(before, current.rows[0].variant if current.rows and current.rows[0].variant
                             in variant_names(before) else None)
    moves = metric_moves(current, before)
    warn(store.problems)
    drift = _drift(store.root, latest)
    if previous is None:
        note = (f"no previous comparable run in {store.root} (same golden set, set, split, selection, gate-only "
                f"and runtime as {latest.run_id})")
    else:
        note = f"compared run {latest.run_id} ({latest.created_at}) with run {previous.run_id} ({previous.created_at})"
    if as_json:
        payload = {
            "report": latest.describe(),
            "previous": previous.describe() if previous is not None else None,
            "compared": note,
            "metrics": {m.metric: m.model_dump(exclude={"metric"}) for m in moves},
            "gates": [g.model_dump() for g in current.gates],
            "verdict": current.verdict,
            "drift": drift.describe() if drift is not None else None,
            "skipped": [{"run_id": s.run_id, "split": s.split, "set": s.set, "gate_only": s.gate_only,
                         "selection": s.selection.describe()}
                        for s in skipped],
        }
        click.echo(json.dumps(payload, indent=2))
        return
    _render(current, latest, moves, note, skipped, has_previous=previous is not None)
    if drift is not None and drift.warning():
        click.echo(clean(f"warning: {drift.warning()}"))


def _drift(root, latest):
    """The drift check of the latest run (``docpilot.history.drift``), or None when the run index cannot say."""
    from docpilot.history.drift import drift_of_file

    return drift_of_file(root, latest.path.name) if latest.path is not None else None


def _render(report, header, moves, note: str, skipped, *, has_previous: bool) -> None:
    from docpilot.reports.scorecard import format_gate_value, format_value, shown_metrics

    console = Console(highlight=False)
    mode = ", gate-only" if report.gate_only else ""
    table = Table(title=f"DocPilot status — run {header.run_id}, {report.split} split{mode}, "
                        f"{len(report.rows)} records", title_justify="left")
    for name, justify in (("metric", "left"), ("value", "right"), ("n", "right"),
                          ("previous", "right"), ("delta", "right"), ("move", "left")):
        table.add_column(name, justify=justify)
    shown, left_off = shown_metrics(report, [move.metric for move in moves])
    for move in moves:
        if move.metric not in shown:
            continue
        delta = "" if move.change == "same" or move.delta is None else _signed(move)
        previous = format_value(move.metric, move.previous) if has_previous else ""
        table.add_row(escape(move.metric), format_value(move.metric, move.value),
                      "" if move.n is None else str(move.n), previous, delta,
                      _VERDICTS.get(move.change or "", ""))
    console.print(table)
    if left_off:
        console.print(escape(left_off), soft_wrap=True)
    if has_previous:
        console.print(escape(_FLOORS), soft_wrap=True)
    for gate in report.gates:
        mark = "[green]pass[/]" if gate.passed else "[red]FAIL[/]"
        console.print(f"  {mark}  {escape(gate.metric)} {gate.op} {gate.threshold:g}  "
                      f"(value {format_gate_value(gate)})")
    colour = "green" if report.verdict == "pass" else "red"
    console.print(f"verdict: [bold {colour}]{report.verdict}[/]  ({header.created_at})")
    console.print(escape(note), soft_wrap=True)
    if skipped:
        shown = ", ".join(f"{s.run_id} ({s.split}{', gate-only' if s.gate_only else ''}, {s.set})"
                          for s in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        console.print(escape(f"passed over runs that differ: {shown}{more}"), soft_wrap=True)
    console.print(escape(f"report: {header.path}"), soft_wrap=True)


def _signed(move) -> str:
    """The change with its sign and the way the value went: `+0.125 ↑`, `−40 ms ↓`."""
    from docpilot.reports.scorecard import format_value

    sign, arrow = ("+", "↑") if move.direction == "up" else ("−", "↓")
    return f"{sign}{format_value(move.metric, abs(move.delta))} {arrow}"
