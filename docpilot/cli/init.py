"""`docpilot init`: a commented config and a starter golden set, so a new project starts from something that runs."""

from __future__ import annotations

from pathlib import Path

import click

from docpilot.cli import main
from docpilot.cli._errors import handle_errors


@main.command("init")
@click.option("--docs", default="docs", show_default=True, type=click.Path(file_okay=False),
              help="Folder of Markdown/MDX pages to measure.")
@click.option("--config", "config_path", default="configs/docpilot.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="Where to write the config.")
@click.option("--golden", "golden_path", default="evals/golden.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="Where to write the starter golden set.")
@click.option("--force", is_flag=True, help="Replace files that already exist.")
@handle_errors
def init_command(docs: str, config_path: str, golden_path: str, force: bool) -> None:
    """Write a commented config and a starter golden set that points at real pages of DOCS.

    Then `docpilot golden check` and `docpilot eval --gate-only` run as they are; rewrite
    the starter questions in your users' words before trusting the numbers. Exit
    status: 0, or 2 when the docs cannot be read or a file exists (use --force).
    """
    from docpilot.corpus.pages import load_corpus
    from docpilot.errors import InputError
    from docpilot.golden.loading import check_golden
    from docpilot.golden.starter import config_text, golden_text, starter_records
    from docpilot.reports.output import write_atomically
    from docpilot.userfiles.userfile import raise_all

    targets = [Path(config_path), Path(golden_path)]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        raise InputError(f"{', '.join(existing)} already exist(s); nothing was written",
                         hint="pass --force to replace them, or --config/--golden to write elsewhere")
    corpus = load_corpus(docs)
    records = starter_records(corpus)
    if not records:
        raise InputError(f"{docs}: no page has a titled section of a dozen words or more to start a golden set from",
                         hint="point --docs at the folder of your Markdown/MDX pages")
    write_atomically(golden_path, golden_text(records, docs))
    checked = check_golden(golden_path, corpus)
    if checked.errors:  # a starter set that does not load is a bug: leave nothing behind, say what it was
        Path(golden_path).unlink(missing_ok=True)
        raise_all(checked.errors)
    write_atomically(config_path, config_text(docs, golden_path))
    click.echo(f"config: {config_path}")
    click.echo(f"golden set: {golden_path} ({len(records)} questions from {len(records)} pages, and two negatives)")
    click.echo("next: rewrite the starter questions in your users' words, pinning each to the ids "
               "`docpilot golden sections` lists; then docpilot golden check, then docpilot eval")
