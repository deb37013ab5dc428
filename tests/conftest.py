"""Test-wide set-up: Prefect, caches and reports live in temporary folders, never in the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.scratch import scratch_folder

# Prefect reads its settings when first imported, so its home is set for the whole process.
os.environ["PREFECT_HOME"] = scratch_folder("docpilot-prefect-")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Caches and reports of every test go to its own temporary folder."""
    monkeypatch.setenv("DOCPILOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCPILOT_REPORTS_DIR", str(tmp_path / "reports"))
    for name in list(os.environ):  # tracing is off unless a test turns it on
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
