"""The `docpilot` command line: argument parsing only; the work happens in the core and the flows.

Each command group lives in its own module here and registers itself on ``main`` when
the command is first asked for. Errors become messages and exit codes only at this edge.
"""

from __future__ import annotations

import importlib

import click

from docpilot import __version__

# Each command's module, imported when the command runs (or when help lists it): a run
# of `docpilot eval` does not load the code of `docpilot serve` or `docpilot improve`.
COMMANDS = {
    "cache": "cache",
    "calibrate": "calibrate",
    "eval": "eval",
    "field": "field",
    "field-draft": "field",
    "field-history": "field",
    "golden": "golden",
    "history": "history",
    "improve": "improve",
    "index": "index",
    "init": "init",
    "report": "report",
    "schedule": "schedule",
    "schema": "schema",
    "score": "score",
    "serve": "serve",
    "status": "status",
}


class _Commands(click.Group):
    """The command group whose commands register themselves when their module is first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            importlib.import_module(f"docpilot.cli.{COMMANDS[name]}")
        return self.commands.get(name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="docpilot")
def main() -> None:
    """Measure a documentation Q&A assistant, question by question."""
