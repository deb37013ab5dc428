"""What changed between two runs: each setting, old → new, and the pages and side files of the docs.

A report keeps its effective configuration, a fingerprint per page and one per side
file (``vocabulary.json``, ``llms.txt``), so two reports say by themselves which
settings, pages and side files differ; ``docpilot improve compare`` names them instead
of only saying "config" or "corpus".

Runs are compared on what they were asked to do, not on what moves by itself from
run to run: ``comparable_config`` leaves out the port the ``local`` provider's server
happened to get (the model file, which the model fingerprint hashes, says which model
it served).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from docpilot.config.variants import flatten
from docpilot.schema import Report

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus

_UNSET = "(unset)"
SIDE_FILES = ("vocabulary.json", "llms.txt")
"""The side files of a docs folder that the corpus reads besides the pages (``docpilot.corpus.sidecar``)."""


class SettingChange(BaseModel):
    """One configuration key whose value differs between run A and run B."""

    model_config = ConfigDict(extra="forbid")

    key: str
    """The dotted key, such as `prime.top_k`."""
    a: Any = None
    """Its value in run A; None when A did not set it."""
    b: Any = None
    """Its value in run B; None when B did not set it."""

    def describe(self) -> str:
        """`prime.top_k 5 → 6`."""
        return f"{self.key} {_shown(self.a)} → {_shown(self.b)}"


class PageChanges(BaseModel):
    """The pages of the docs that differ between run A and run B."""

    model_config = ConfigDict(extra="forbid")

    recorded: bool = True
    """Whether both reports hold page fingerprints (reports written before they did do not)."""
    changed: list[str] = Field(default_factory=list)
    """Pages whose text differs."""
    added: list[str] = Field(default_factory=list)
    """Pages only run B had."""
    removed: list[str] = Field(default_factory=list)
    """Pages only run A had."""
    side_files: dict[str, Literal["changed", "added", "removed"]] = Field(default_factory=dict)
    """Side files (`vocabulary.json`, `llms.txt`) that differ: changed, added in B or removed in B."""
    side_files_recorded: bool = True
    """Whether both reports hold side-file fingerprints (reports written before they did do not)."""

    def describe(self, shown: int = 10) -> str:
        """`vocabulary.json changed; pages changed: guide/auth; added: faq`, or why they cannot be named."""
        parts = [f"{name} {how}" for name, how in self.side_files.items()]
        if not self.recorded:
            parts.append("the pages cannot be named: a report predates page fingerprints")
        for label, pages in (("pages changed", self.changed), ("added", self.added), ("removed", self.removed)):
            if pages:
                more = f" and {len(pages) - shown} more" if len(pages) > shown else ""
                parts.append(f"{label}: {', '.join(pages[:shown])}{more}")
        if parts:
            return "; ".join(parts)
        if not self.side_files_recorded:
            return ("no page differs; vocabulary.json and llms.txt cannot be told apart: "
                    "a report predates their fingerprints")
        return "no page or side file differs (the change is in how the docs are read)"


def page_fingerprints(corpus: Corpus) -> dict[str, str]:
    """Page id → sha256 of what the index reads of the page: title, description, keywords, sections."""
    found = {}
    for page_id, page in sorted(corpus.pages.items()):
        content = [page.title, page.description or "", list(page.keywords),
                   [(s.id, s.title, s.text) for s in page.sections]]
        found[page_id] = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()
    return found


def side_file_fingerprints(corpus: Corpus) -> dict[str, str | None]:
    """Side file name → sha256 of its bytes as the corpus read them; None for one the docs folder lacks."""
    return {name: corpus.side_files.get(name) for name in SIDE_FILES}


def comparable_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as two runs are compared on: without the ``local`` provider's ``model.base_url``.

    That server is started on a free port for each run, so its URL changes every time
    while the model it serves does not.
    """
    model = config.get("model")
    if isinstance(model, Mapping) and model.get("provider") == "local" and "base_url" in model:
        return {**config, "model": {key: value for key, value in model.items() if key != "base_url"}}
    return dict(config)


def setting_changes(a: Report, b: Report) -> list[SettingChange]:
    """Every configuration key whose value differs, in sorted key order (``comparable_config`` of each)."""
    flat_a, flat_b = flatten(comparable_config(a.config or {})), flatten(comparable_config(b.config or {}))
    return [SettingChange(key=key, a=flat_a.get(key), b=flat_b.get(key))
            for key in sorted(flat_a.keys() | flat_b.keys()) if flat_a.get(key) != flat_b.get(key)]


def page_changes(a: Report, b: Report) -> PageChanges:
    """The pages and side files that differ, from the two reports' page and side-file fingerprints."""
    files_a, files_b = a.side_file_fingerprints, b.side_file_fingerprints
    side_files: dict[str, Literal["changed", "added", "removed"]] = {}
    if files_a and files_b:
        for name in sorted(files_a.keys() | files_b.keys()):
            before, after = files_a.get(name), files_b.get(name)
            if before != after:
                side_files[name] = "added" if before is None else "removed" if after is None else "changed"
    found = PageChanges(side_files=side_files, side_files_recorded=bool(files_a and files_b))
    pages_a, pages_b = a.page_fingerprints, b.page_fingerprints
    if not pages_a or not pages_b:
        return found.model_copy(update={"recorded": False})
    return found.model_copy(update={
        "changed": sorted(p for p in pages_a.keys() & pages_b.keys() if pages_a[p] != pages_b[p]),
        "added": sorted(pages_b.keys() - pages_a.keys()),
        "removed": sorted(pages_a.keys() - pages_b.keys()),
    })


def _shown(value: Any) -> str:
    return _UNSET if value is None else json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
