"""A copy of the demo docs and golden set, and the week of docs edits that moves the ground under its gold.

``move_the_docs`` makes four edits a docs team makes every week, each under a record
of ``evals/golden.yaml``: a heading renamed (its slug anchor moves), a section
rewritten, a section removed, and a page split in two. ``EXPECTED`` is what ``golden
check`` must then say of each record touched.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import ROOT

EXPECTED = {
    "ret-mrr": ("moved", {"metrics/retrieval#mrr": "metrics/retrieval#mean-reciprocal-rank"}),
    "metrics-flaky": ("moved", {"getting-started#scorecard": "reading-the-scorecard#scorecard"}),
    "cache-page-edit": ("changed", {}),
    "models-openai-retries": ("gone", {}),
    "start-make-eval": ("narrowed", {}),
}
"""Record id → (its state after ``move_the_docs``, its moved entries old → new)."""

REWRITTEN = "Since this release every page edit sends every record to the model again."
"""The sentence the rewrite adds at the top of ``caching#invalidation``."""


def copy_demo(folder: Path) -> Path:
    """The demo docs and golden set copied into ``folder`` (``docs/``, ``evals/golden.yaml``); returns ``folder``."""
    shutil.copytree(ROOT / "docs", folder / "docs")
    (folder / "evals").mkdir()
    shutil.copy(ROOT / "evals" / "golden.yaml", folder / "evals" / "golden.yaml")
    return folder


def move_the_docs(docs: Path) -> None:
    """Rename a heading, rewrite a section, remove one and split a page, in the demo docs at ``docs``."""
    _edit(docs / "metrics" / "retrieval.md", lambda text: _one(text, "\n## MRR\n", "\n## Mean reciprocal rank\n"))
    _edit(docs / "caching.md", lambda text: _one(text, "## What a change re-runs { #invalidation }\n",
                                                 f"## What a change re-runs {{ #invalidation }}\n\n{REWRITTEN}\n"))
    _edit(docs / "models.md", lambda text: _cut(text, "### Retries and timeouts { #retries }")[0])
    page = docs / "getting-started.md"
    rest, scorecard = _cut(page.read_text(encoding="utf-8"), "## Reading the scorecard { #scorecard }")
    page.write_text(rest, encoding="utf-8")
    (docs / "reading-the-scorecard.md").write_text(scorecard, encoding="utf-8")


def _edit(path: Path, change) -> None:
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")


def _one(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise AssertionError(f"the demo docs changed: {old!r} is no longer there once; update tests/support/moved_docs.py")
    return text.replace(old, new)


def _cut(text: str, heading: str) -> tuple[str, str]:
    """The text without the section under ``heading`` (to the next heading of its level or above), and that section."""
    start = text.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    fenced = False
    position = text.index("\n", start) + 1
    for line in text[position:].splitlines(keepends=True):
        fenced ^= line.lstrip().startswith("```")
        found = re.match(r"(#+) ", line)
        if not fenced and found and len(found.group(1)) <= level:
            break
        position += len(line)
    return text[:start] + text[position:], text[start:position]
