"""`docpilot report`: a saved report as an HTML page, JUnit XML or a Markdown summary."""

from __future__ import annotations

from pathlib import Path

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.cli._outputs import chosen_outputs, output_options
from docpilot.reports.terminal import clean


@main.command("report")
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False))
@output_options(also=False)
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
              help="Folder to find the previous comparable run in (default: the report's folder "
                   "and its reports_dir).")
@handle_errors
def report_command(report_path, reports_dir, **formats):
    """Turn a saved report into pages people read.

    With no output option, writes the HTML report next to REPORT, named like it with
    .html in place of .json.
    Each file is written atomically. Exit status: 0, or 2 when the report cannot be
    read or an output cannot be written.
    """
    from docpilot.readout.files import write_readout
    from docpilot.readout.formats import FORMATS
    from docpilot.readout.outcomes import prepare_readout
    from docpilot.reports.output import check_output
    from docpilot.reports.report import load_report

    report = load_report(report_path)
    outputs = chosen_outputs(formats) or {"html": str(Path(report_path).with_suffix(".html"))}
    printed = [name for name, where in outputs.items() if where == "-"]
    for name, where in outputs.items():
        if where != "-":
            check_output(where, FORMATS[name].what)  # before any file is written, so none is left alone
    files = {name: where for name, where in outputs.items() if where != "-"}
    if report.variants:  # a run of several variants: the matrix page, a suite per variant, a matrix table
        from docpilot.readout.files import write_outputs
        from docpilot.readout.markdown import render_markdown_variants

        written = write_outputs(report, **files)
        for _ in printed:
            click.echo(clean(render_markdown_variants(report)), nl=False)
    else:
        readout = prepare_readout(report, report_path=report_path, reports_dir=reports_dir)
        written = write_readout(readout, **files)
        for name in printed:
            click.echo(clean(FORMATS[name].render(readout)), nl=False)  # answers may hold control characters
    for kind, path in written.items():
        click.echo(f"{kind}: {path}", err=bool(printed))
