"""`docpilot schema`: print the JSON Schema of a file DocPilot reads or writes, for editors and other tools."""

from __future__ import annotations

import functools
import json
import operator
from typing import Any

import click
from pydantic import BaseModel, ConfigDict, TypeAdapter

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.config.model import Config
from docpilot.json_schema import DocumentedSchema, json_schema_of
from docpilot.schema import AttackProbe, Conversation, GoldenRecord, Report


class GoldenSetMapping(BaseModel):
    """A golden set written as a mapping whose only key is `records`."""

    model_config = ConfigDict(extra="forbid")
    records: list[GoldenRecord | Conversation]
    """The records, one mapping each: a single question, or a conversation with `turns:`."""


class AttackProbesMapping(BaseModel):
    """Attack probes written as a mapping whose only key is `records`."""

    model_config = ConfigDict(extra="forbid")
    records: list[AttackProbe]
    """The probes, one mapping each."""


def _file_schema(records: tuple[type[BaseModel], ...], mapping: type[BaseModel], what: str) -> dict[str, Any]:
    """The schema of a whole YAML or JSON file: a list of records (each of one of ``records``), or a mapping
    with `records:`."""
    entry = functools.reduce(operator.or_, records)
    schema = TypeAdapter(list[entry] | mapping).json_schema(schema_generator=DocumentedSchema)  # type: ignore[valid-type]
    lines = " or ".join(f"`$defs/{record.__name__}`" for record in records)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": what,
            "description": f"A {what} file (YAML or JSON): a list of records, or a mapping with a `records:` list. "
                           f"A JSONL file holds one {lines} per line.", **schema}


SCHEMAS: dict[str, Any] = {
    "golden": lambda: _file_schema((GoldenRecord, Conversation), GoldenSetMapping, "golden set"),
    "golden-record": lambda: json_schema_of(GoldenRecord),
    "adversarial": lambda: _file_schema((AttackProbe,), AttackProbesMapping, "attack probes"),
    "adversarial-record": lambda: json_schema_of(AttackProbe),
    "report": lambda: json_schema_of(Report),
    "config": lambda: json_schema_of(Config),
}
"""Schema name on the command line → the function that builds it."""


@main.command("schema")
@click.argument("name", type=click.Choice(list(SCHEMAS)))
@handle_errors()
def schema(name: str) -> None:
    """Print the JSON Schema of NAME.

    golden and adversarial describe a whole file (point an editor at them to check
    golden.yaml); golden-record and adversarial-record describe one record (a JSONL
    line); report and config describe a report and the config file.
    """
    click.echo(json.dumps(SCHEMAS[name](), indent=2, ensure_ascii=False))
