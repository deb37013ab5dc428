"""Shared fixtures for the metric tests: a compact way to write report rows by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from docpilot.schema import Row

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"


@pytest.fixture
def make_row() -> Callable[..., Row]:
    """Build a Row with only the fields a test cares about; the rest keep their defaults."""

    def make(id: str = "r1", kind: str = "positive", **fields: Any) -> Row:
        fields.setdefault("split", "dev")
        fields.setdefault("question", f"question of {id}?")
        return Row(id=id, kind=kind, **fields)

    return make


@pytest.fixture
def data_dir() -> Path:
    """The folder of metric case tables."""
    return DATA
