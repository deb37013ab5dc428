"""An edit: one concrete change to the docs, the config, the prompt or the golden set that may move a record."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

EditKind = Literal["vocabulary", "heading", "docs", "config", "prompt", "golden", "investigate"]
"""What an edit changes."""


class Edit(BaseModel):
    """One concrete change that may move a failing record."""

    model_config = ConfigDict(extra="forbid")

    kind: EditKind
    """What is edited: vocabulary.json, a heading, page text, a config option, the prompt,
    the golden record, or nothing yet (look first)."""
    target: str
    """The file, section or option to change."""
    change: str
    """The change, in words."""
    value: Any = None
    """The change as data: a vocabulary entry, an option's new value."""
    effect: str | None = None
    """What the report's data says the change would do; None when it cannot tell."""
