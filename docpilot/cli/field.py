"""`docpilot field LOG`: a production log of an assistant's turns, scored without gold, and its coverage gaps."""

from __future__ import annotations

import json
from pathlib import Path

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.command("field")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--log", "mapping", metavar="NAME", help="The mapping under `logs:` that reads LOG (default: the only one).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--docs", type=click.Path(file_okay=False), help="Docs folder (default: corpus.docs from the config).")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Where the JSON report goes (default: field-<run id>.json under reports_dir).")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False), help="Also write the report as Markdown here.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Also write the report as an HTML page here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the table.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Processes that score parts of a JSONL log at once (a CSV log is read by one).")
@handle_errors
def field_command(log, mapping, config_path, docs, out, markdown_out, html_out, as_json, workers):
    """Score the turns of LOG (JSONL or CSV) without gold and group the questions the docs do not answer.

    LOG is read by a mapping under `logs:` in the config (docs/field.md). Every turn is
    scored with the eval's gold-free metrics and ranked against the docs; the report
    (JSON, and each scored turn in a JSONL file beside it) lists the coverage gaps, most
    asked first, each a page to write or a page the assistant missed. Exit status: 0,
    or 2 when the config or a line of LOG cannot be read (the message names the line).
    """
    from docpilot.config.loading import load_config
    from docpilot.field.markdown import field_markdown
    from docpilot.field.run import save_field_run

    config = load_config(config_path, overrides={"corpus": {"docs": docs}})
    report, target = save_field_run(config, Path(log), mapping, out=Path(out) if out else None, workers=workers)
    if markdown_out:
        Path(markdown_out).write_text(field_markdown(report), encoding="utf-8")
    if html_out:
        from docpilot.field.html import field_html

        Path(html_out).write_text(field_html(report), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    click.echo(field_markdown(report), nl=False)
    click.echo(f"\nreport: {target}\nturns: {report['rows']}")


@main.command("field-draft")
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False, exists=True))
@click.option("--group", "rank", type=click.IntRange(min=1), required=True, help="The rank of the gap group to draft from.")
@click.option("--most", type=click.IntRange(min=1), default=10, show_default=True, help="Draft at most N questions.")
@click.option("--out", type=click.Path(dir_okay=False), default="evals/field-drafts.yaml", show_default=True,
              help="The file of drafts to write.")
@handle_errors
def field_draft_command(report_path, rank, most, out):
    """Draft golden records from one coverage gap of a field REPORT, for `docpilot golden accept --from`.

    A page the assistant missed gives positives whose proposed gold is the group's
    nearest section; a page to write gives negatives. Each is tagged `needs-check`.
    Exit status: 0, or 2 when REPORT cannot be read or has no such group.
    """
    from docpilot.errors import InputError
    from docpilot.field.drafts import draft_group, drafts_text

    try:
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"not a field report ({exc})", path=report_path, hint="give the JSON `docpilot field` wrote") from None
    drafts = draft_group(report, rank, most=most)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(drafts_text(drafts, report, rank), encoding="utf-8")
    click.echo(f"wrote {len(drafts)} draft(s) to {out}; review them, then "
               f"`docpilot golden accept ID... --from {out}`")


@main.command("field-history")
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
              help="Folder of field reports (default: reports_dir from the config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Configuration file (YAML).")
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
@handle_errors
def field_history_command(reports_dir, config_path, as_json):
    """Show each saved field run's headline numbers and largest gap, oldest first.

    Reads the field reports in the reports folder; other files are passed over. Exit
    status: 0.
    """
    from docpilot.cli.status import reports_folder, warn
    from docpilot.field.history import HEADLINE, field_history
    from docpilot.field.markdown import _cell, _number

    lines, skipped = field_history(Path(reports_folder(reports_dir, config_path)))
    warn(skipped)
    if as_json:
        click.echo(json.dumps(lines, indent=2, ensure_ascii=False))
        return
    if not lines:
        click.echo("no field runs yet: `docpilot field LOG` makes one")
        return
    click.echo("| created | log | " + " | ".join(HEADLINE) + " | largest gap |")
    click.echo("|---|---|" + "---|" * len(HEADLINE) + "---|")
    for line in lines:
        gap = line["top_gap"]
        shown = f"{_cell(gap['label'])} ({gap['asks']}, {gap['verdict']})" if gap else "none"
        click.echo(f"| {line['created_at']} | {_cell(line['log'])} | "
                   + " | ".join(_number(line[k]) for k in HEADLINE) + f" | {shown} |")
