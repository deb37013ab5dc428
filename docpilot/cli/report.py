"""`docpilot report`: a saved report as an HTML page, JUnit XML or a Markdown summary."""

from __future__ import annotations

from pathlib import Path

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.command("report")
@click.argument("report_path", metavar="REPORT", type=click.Path(dir_okay=False))
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write the self-contained HTML report here.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Write JUnit XML (one test per record and per gate) here.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write a Markdown summary here; '-' prints it.")
@click.option("--reports", "reports_dir", type=click.Path(file_okay=False),
              help="Folder to find the previous comparable run in (default: the report's folder "
                   "and its reports_dir).")
@handle_errors
def report_command(report_path, html_path, junit_path, markdown_path, reports_dir):
    """Turn a saved report into pages people read.

    With no output option, writes the HTML report next to REPORT, named like it with
    .html in place of .json.
    Each file is written atomically. Exit status: 0, or 2 when the report cannot be
    read or an output cannot be written.
    """
    from docpilot.readout.files import write_readout
    from docpilot.readout.markdown import render_markdown
    from docpilot.readout.outcomes import prepare_readout
    from docpilot.reports.output import check_output
    from docpilot.reports.report import load_report

    report = load_report(report_path)
    if not (html_path or junit_path or markdown_path):
        html_path = str(Path(report_path).with_suffix(".html"))
    to_stdout = markdown_path == "-"
    for what, where in (("HTML report", html_path), ("JUnit XML", junit_path), ("Markdown summary", markdown_path)):
        if where and where != "-":
            check_output(where, what)  # before any file is written, so none is left alone
    if report.variants:  # a run of several variants: the matrix page, a suite per variant, a matrix table
        from docpilot.readout.files import write_outputs
        from docpilot.readout.markdown import render_markdown_variants

        written = write_outputs(report, html=html_path, junit=junit_path, markdown=None if to_stdout else markdown_path)
        if to_stdout:
            click.echo(render_markdown_variants(report), nl=False)
    else:
        readout = prepare_readout(report, report_path=report_path, reports_dir=reports_dir)
        written = write_readout(readout, html=html_path, junit=junit_path,
                                markdown=None if to_stdout else markdown_path)
        if to_stdout:
            click.echo(render_markdown(readout), nl=False)
    for kind, path in written.items():
        click.echo(f"{kind}: {path}", err=to_stdout)
