"""Field docstrings become the JSON Schema's descriptions when a schema is asked for, not at import."""

from __future__ import annotations

import subprocess
import sys

from pydantic import BaseModel, Field

from docpilot.config.model import Config, CorpusConfig
from docpilot.json_schema import field_docstrings, json_schema_of


class _Base(BaseModel):
    name: str
    """The base's field."""
    size: int = Field(default=1, description="Given with Field, it wins.")
    """Not this one."""


class _Child(_Base):
    colour: str = "blue"
    """The child's own field."""
    name: str = "x"  # redefined without a docstring: the base's still describes it
    plain: int = 0
    count: int = 0
    """Counted."""


def test_a_fields_docstring_is_its_description():
    schema = json_schema_of(CorpusConfig)
    assert schema["properties"]["chunk_words"]["description"] == (
        "Longest chunk, in words; a longer section is split into several chunks."
    )


def test_nested_models_are_described_too():
    schema = json_schema_of(Config)
    corpus = schema["$defs"]["CorpusConfig"]["properties"]
    assert corpus["docs"]["description"].startswith("Folder of Markdown/MDX pages")


def test_field_descriptions_win_and_bases_describe_inherited_fields():
    properties = json_schema_of(_Child)["properties"]
    assert properties["size"]["description"] == "Given with Field, it wins."
    assert properties["colour"]["description"] == "The child's own field."
    assert properties["name"]["description"] == "The base's field."
    assert properties["count"]["description"] == "Counted."
    assert "description" not in properties["plain"]  # the next field's docstring is not its own


def test_docstrings_are_read_only_when_a_schema_is_made():
    code = (
        "import docpilot.config.model as m\n"
        "print(m.CorpusConfig.model_fields['chunk_words'].description)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "None"
    assert field_docstrings(CorpusConfig)["chunk_words"].startswith("Longest chunk")
