"""The `docpilot` command line: argument parsing only; the work happens in the core and the flows.

Each command group lives in its own module here and registers itself on ``main``.
Errors become messages and exit codes only at this edge.
"""

from __future__ import annotations

import importlib

import click

from docpilot import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="docpilot")
def main() -> None:
    """Measure a documentation Q&A assistant, question by question."""


for _module in ("eval", "golden", "schema", "index", "status", "improve", "serve", "report", "cache", "calibrate", "schedule"):
    try:
        importlib.import_module(f"docpilot.cli.{_module}")
    except ModuleNotFoundError as exc:  # a command module not yet present
        if exc.name != f"docpilot.cli.{_module}":
            raise
