"""`docpilot schema`: print the JSON Schema of a file DocPilot reads or writes, for editors and other tools."""

from __future__ import annotations

import json

import click
from pydantic import BaseModel

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.config.model import Config
from docpilot.schema import AttackProbe, GoldenRecord, Report

SCHEMAS: dict[str, type[BaseModel]] = {
    "golden": GoldenRecord,
    "adversarial": AttackProbe,
    "report": Report,
    "config": Config,
}
"""Schema name on the command line → the model it describes."""


@main.command("schema")
@click.argument("name", type=click.Choice(list(SCHEMAS)))
@handle_errors()
def schema(name: str) -> None:
    """Print the JSON Schema of NAME: one golden record, one attack probe, a report, or the config file."""
    click.echo(json.dumps(SCHEMAS[name].model_json_schema(), indent=2, ensure_ascii=False))
