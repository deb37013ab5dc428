"""`docpilot schema NAME` prints a JSON Schema that other tools can read."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("name", "properties"),
    [
        ("golden-record", {"id", "question", "gold", "gold_answer", "split", "expected_cause", "scope"}),
        ("adversarial-record", {"id", "prompt", "forbidden", "expect"}),
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
    schema = json.loads(CliRunner().invoke(main, ["schema", "golden-record"]).stdout)
    assert schema["properties"]["split"]["enum"] == ["dev", "test"]
    assert schema["required"] == ["id", "question"]


def test_unknown_schema_is_a_usage_error():
    result = CliRunner().invoke(main, ["schema", "rows"])
    assert result.exit_code == 2 and "golden" in result.stderr and result.stdout == ""


@pytest.mark.parametrize(("name", "path"), [("golden", "evals/golden.yaml"), ("adversarial", "evals/adversarial.yaml")])
def test_the_file_schema_validates_a_whole_file(name, path):
    # Regression: the golden schema described one record, so an editor pointed at it flagged golden.yaml.
    schema = json.loads(CliRunner().invoke(main, ["schema", name]).stdout)
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    jsonschema.validate({"records": data}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{**data[0], "questoin": "typo"}], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"record": data}, schema)


def test_the_report_schema_lists_every_error_code_a_row_may_carry():
    from typing import get_args

    from docpilot.schema import ErrorCode

    schema = json.loads(CliRunner().invoke(main, ["schema", "report"]).stdout)
    code = schema["$defs"]["Row"]["properties"]["error_code"]
    assert code["anyOf"][0]["enum"] == list(get_args(ErrorCode)) and code["description"]
