"""The options that write a report's readable forms, one per format of ``docpilot.readout.formats``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from docpilot.readout.formats import FORMATS


def output_options(*, also: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``--NAME PATH`` for every format; ``also`` words the help for a command whose main output is another."""

    def add(command: Callable[..., Any]) -> Callable[..., Any]:
        for name, form in reversed(FORMATS.items()):  # click lists options in the order they were added
            dash = form.to_stdout and not also
            text = f"{'Also write' if also else 'Write'} {form.help} here" + ("; '-' prints it." if dash else ".")
            command = click.option(f"--{name}", f"{name}_path", type=click.Path(dir_okay=False, allow_dash=dash),
                                   help=text)(command)
        return command

    return add


def chosen_outputs(params: dict[str, Any]) -> dict[str, str]:
    """The formats asked for on the command line and their paths, taken out of the command's ``params``."""
    return {name: path for name in FORMATS if (path := params.pop(f"{name}_path", None))}
