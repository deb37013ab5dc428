"""`docpilot calibrate`: choose the retrieval gate's threshold on the dev split and write it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.cli._numbers import option_number
from docpilot.config.model import GuardConfig


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


@main.command("calibrate")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Configuration file to read, and to write the threshold into.")
@click.option("--docs", type=click.Path(file_okay=False), help="Docs folder (overrides corpus.docs).")
@click.option("--golden", type=click.Path(dir_okay=False), help="Golden set, YAML or JSONL.")
@click.option("--target", type=option_number(GuardConfig, "max_over_refusal"),
              help="Highest allowed 95 % upper bound of the gate's over-refusal (default: guard.max_over_refusal).")
@click.option("--write/--no-write", default=True, show_default=True,
              help="Write guard.mode: on and the chosen threshold into the config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the table and the choice as JSON.")
@handle_errors
def calibrate_command(config_path, docs, golden, target, write, as_json):
    """Choose the gate threshold on the dev split: most negatives caught while the gate's
    over-refusal (its one-sided 95 % Wilson upper bound) stays within the target."""
    from docpilot import progress
    from docpilot.config.loading import DEFAULT_PATH, load_config
    from docpilot.errors import InputError
    from docpilot.improve.calibration import (
        calibration_table,
        choose_threshold,
        write_guard,
    )
    from docpilot.run.evaluation import evaluate
    from docpilot.run.job import build_job, read_records

    overrides: dict = {}
    if docs:
        overrides["corpus"] = {"docs": docs}
    if golden:
        overrides["golden"] = golden
    config = load_config(config_path, overrides=overrides)
    dev = [r for r in read_records(config.golden) if r.split == "dev"]
    if not any(r.kind == "negative" for r in dev) or not any(r.kind == "positive" for r in dev):
        raise InputError(
            "the dev split needs both positives and negatives to calibrate the gate",
            path=config.golden,
            hint="add questions the docs do not answer (empty gold) and ones they do, with split: dev",
        )
    # The dev split's rankings, as a gate-only eval makes them (its report is a scratch file):
    # the gold entries checked against the docs, each ranking looked up in the stage cache first.
    with progress.shown(), tempfile.TemporaryDirectory(prefix="docpilot-calibrate-") as scratch:
        job = build_job(config, split="dev", gate_only=True, out=str(Path(scratch) / "dev.json"))
        rows = evaluate(job).rows
    target = target or config.guard.max_over_refusal
    table = calibration_table(rows)
    chosen = choose_threshold(table, target)
    destination = config_path or str(DEFAULT_PATH)
    if chosen is not None and write:
        write_guard(destination, chosen.threshold)
    if as_json:
        click.echo(json.dumps({
            "target": target,
            "table": [c.model_dump() for c in table],
            "chosen": chosen.model_dump() if chosen else None,
            "written": destination if chosen is not None and write else None,
        }, indent=2))
        return
    _print_table(table, chosen, target)
    if chosen is None:
        click.echo(f"no threshold keeps the over-refusal bound within {target:g}; nothing written")
    elif write:
        click.echo(f"wrote guard.mode: on, guard.threshold: {chosen.threshold:g} to {destination}")


def _print_table(table, chosen, target: float) -> None:
    first = table[0]
    grid = Table(title=f"gate calibration on dev: {first.positives} positives, {first.negatives} negatives, "
                       f"target ≤ {target:g}", title_justify="left")
    for column in ("threshold", "negatives caught", "over-refusal", "≤ at 95 %", ""):
        grid.add_column(column, justify="right")
    best = -1.0
    for candidate in table:
        caught = candidate.negatives_caught or 0.0
        if caught <= best and candidate is not chosen:
            continue  # refuses more positives for no more negatives: never worth choosing
        best = max(best, caught)
        mark = "← chosen" if candidate is chosen else ""
        grid.add_row(f"{candidate.threshold:.3f}", _fmt(candidate.negatives_caught), _fmt(candidate.over_refusal_gate),
                     _fmt(candidate.over_refusal_gate_upper95), mark)
    Console().print(grid)
