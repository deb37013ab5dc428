"""The `docpilot` command line: argument parsing only; the work happens in the core and the flows.

Each command group lives in its own module here and registers itself on ``main``.
Errors become messages and exit codes only at this edge.
"""

from __future__ import annotations

import click

from docpilot import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="docpilot")
def main() -> None:
    """Measure a documentation Q&A assistant, question by question."""


# The command modules register themselves on `main` when imported.
from docpilot.cli import (  # noqa: E402,F401
    cache,
    calibrate,
    eval,
    golden,
    improve,
    index,
    init,
    report,
    schedule,
    schema,
    serve,
    status,
)
