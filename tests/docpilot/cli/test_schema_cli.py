"""`docpilot schema NAME` prints a JSON Schema that other tools can read."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docpilot.cli import main


@pytest.mark.parametrize(
    ("name", "properties"),
    [
        ("golden", {"id", "question", "gold", "gold_answer", "split", "expected_cause", "scope"}),
        ("adversarial", {"id", "prompt", "forbidden", "expect"}),
        ("report", {"schema_version", "run_id", "rows", "summary", "gates", "verdict"}),
        ("config", {"corpus", "retrieval", "model", "guard", "gates", "shard_size"}),
    ],
)
def test_schema_is_json_with_the_model_fields(name, properties):
    result = CliRunner().invoke(main, ["schema", name])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert properties <= set(schema["properties"])
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert result.stdout.startswith('{\n  "')  # indented by two spaces


def test_golden_schema_names_the_allowed_values():
    schema = json.loads(CliRunner().invoke(main, ["schema", "golden"]).stdout)
    assert schema["properties"]["split"]["enum"] == ["dev", "test"]
    assert schema["required"] == ["id", "question"]


def test_unknown_schema_is_a_usage_error():
    result = CliRunner().invoke(main, ["schema", "rows"])
    assert result.exit_code == 2 and "golden" in result.stderr and result.stdout == ""
