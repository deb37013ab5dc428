"""What changed between two runs: each setting, old → new, and the pages of the docs.

A report keeps its effective configuration and a fingerprint per page, so two reports
say by themselves which settings and which pages differ; ``docpilot improve compare``
names them instead of only saying "config" or "corpus".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from docpilot.schema import Report

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus

_UNSET = "(unset)"


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

    def describe(self, shown: int = 10) -> str:
        """`pages changed: guide/auth; added: faq`, or why the pages cannot be named."""
        if not self.recorded:
            return "the pages cannot be named: a report predates page fingerprints"
        parts = []
        for label, pages in (("pages changed", self.changed), ("added", self.added), ("removed", self.removed)):
            if pages:
                more = f" and {len(pages) - shown} more" if len(pages) > shown else ""
                parts.append(f"{label}: {', '.join(pages[:shown])}{more}")
        return "; ".join(parts) or "no page differs (the change is in how the docs are read)"


def page_fingerprints(corpus: Corpus) -> dict[str, str]:
    """Page id → sha256 of what the index reads of the page: title, description, keywords, sections."""
    found = {}
    for page_id, page in sorted(corpus.pages.items()):
        content = [page.title, page.description or "", list(page.keywords),
                   [(s.id, s.title, s.text) for s in page.sections]]
        found[page_id] = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()
    return found


def setting_changes(a: Report, b: Report) -> list[SettingChange]:
    """Every configuration key whose value differs, in sorted key order."""
    flat_a, flat_b = _flatten(a.config or {}), _flatten(b.config or {})
    return [SettingChange(key=key, a=flat_a.get(key), b=flat_b.get(key))
            for key in sorted(flat_a.keys() | flat_b.keys()) if flat_a.get(key) != flat_b.get(key)]


def page_changes(a: Report, b: Report) -> PageChanges:
    """The pages that differ, from the two reports' page fingerprints."""
    pages_a, pages_b = a.page_fingerprints, b.page_fingerprints
    if not pages_a or not pages_b:
        return PageChanges(recorded=False)
    return PageChanges(
        changed=sorted(p for p in pages_a.keys() & pages_b.keys() if pages_a[p] != pages_b[p]),
        added=sorted(pages_b.keys() - pages_a.keys()),
        removed=sorted(pages_a.keys() - pages_b.keys()),
    )


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _shown(value: Any) -> str:
    return _UNSET if value is None else json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
