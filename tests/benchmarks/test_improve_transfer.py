"""The improve-transfer benchmark's ceiling: entries chosen on the test questions, measured on them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks import improve_transfer
from docpilot.golden.loading import load_golden

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_swapping_splits_moves_every_record_to_the_other_split_and_keeps_the_rest():
    text = (ROOT / "evals" / "golden.yaml").read_text(encoding="utf-8")
    swapped = yaml.safe_load(improve_transfer.swap_splits(text))
    original = yaml.safe_load(text)
    assert len(swapped) == len(original)
    assert {r["split"] for r in original} == {"dev", "test"}
    for before, after in zip(original, swapped, strict=True):
        assert after == {**before, "split": "test" if before["split"] == "dev" else "dev"}


def test_the_ceiling_starts_from_the_test_splits_own_figures(tmp_path, monkeypatch):
    # The demo docs and set: the ceiling's "before" is the test split as a plain eval scores it.
    monkeypatch.setattr(improve_transfer, "SUITES", {"demo": ("docs", ROOT / "evals" / "golden.yaml")})
    result = improve_transfer.ceiling("demo", ROOT, tmp_path)
    env = improve_transfer._environment(tmp_path / "plain")
    plain = improve_transfer._eval("test", ROOT / "docs", ROOT / "evals" / "golden.yaml", tmp_path / "plain.json", env)
    assert result["before"] == {m: plain[m] for m in ("recall@8", "mrr")}
    assert result["after"]["recall@8"] >= result["before"]["recall@8"]
    for entry in result["entries"]:
        assert entry["word"] and entry["added"] and "related" in entry["reason"]
    swapped = load_golden(tmp_path / "demo-ceiling" / "golden.yaml")
    assert {r.id for r in swapped if r.split == "dev"} == {r.id for r in load_golden(ROOT / "evals" / "golden.yaml")
                                                           if r.split == "test"}
