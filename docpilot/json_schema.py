"""JSON Schema of DocPilot's models, each field described by the docstring written under it.

The models document a field the way the code reads best, with a string under it::

    chunk_words: int = 220
    \"\"\"Longest chunk, in words; a longer section is split into several chunks.\"\"\"

Pydantic can read those strings as each model class is made, but that parses the
source of every model whenever the package is imported: a cost every command would pay
for the few that print a schema (``docpilot schema``, the server's ``/openapi.json``).
So the strings are read here, when a schema is asked for, and written into it as the
fields' ``description``; a description given with ``Field(description=...)`` wins.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import cache
from itertools import pairwise
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema


class DocumentedSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema generator, with each model field's docstring as its description."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        cls = schema["cls"]
        properties = json_schema.get("properties")
        if not isinstance(properties, dict) or not issubclass(cls, BaseModel):
            return json_schema
        docs = field_docstrings(cls)
        for name, field in cls.model_fields.items():
            described = properties.get(self._property(name, field))
            if isinstance(described, dict) and name in docs and "description" not in described:
                described["description"] = docs[name]
        return json_schema

    def _property(self, name: str, field: Any) -> str:
        """The field's key in the schema's properties: its alias for this mode, else its name."""
        alias = field.serialization_alias if self.mode == "serialization" else field.validation_alias
        for key in (alias, field.alias):
            if isinstance(key, str):
                return key
        return name


def field_docstrings(cls: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string right under it), looked up through the bases, nearest first."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            docs.update(_own_docstrings(klass))
    return docs


@cache
def _own_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of the fields written in ``cls``'s own body; none when its source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
    docs: dict[str, str] = {}
    for statement, following in pairwise(body):
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def json_schema_of(model: Any, *, mode: str = "validation") -> dict[str, Any]:
    """The JSON Schema of a model class, with its fields' docstrings."""
    return model.model_json_schema(schema_generator=DocumentedSchema, mode=mode)
