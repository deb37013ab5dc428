"""Drafts from the field: a coverage gap's questions as golden records for a person to review.

A group of a field report becomes drafts in the golden-set schema, written as
``docpilot golden draft`` writes its own (``golden.draft.draft_fields``), so
``docpilot golden accept ID... --from FILE`` moves the reviewed ones into the golden set:

- a page the assistant missed: each question is a positive whose proposed gold is the
  group's nearest section (the docs hold something there), with no gold answer yet;
- a page to write: each question is a negative (`not-answerable`), since the docs hold
  nothing near it; once the page exists, give it gold instead.

Every draft is tagged `draft` and `needs-check`: a proposed gold entry is a guess.
"""

from __future__ import annotations

import re
from typing import Any

from docpilot.errors import InputError
from docpilot.golden.draft import CHECK_TAG, DRAFT_TAG, Draft, draft_fields, page_split, record_lines
from docpilot.golden.starter import unique_id

__all__ = ["draft_group", "drafts_text"]

_SLUG = re.compile(r"[^a-z0-9]+")


def draft_group(report: dict[str, Any], rank: int, *, most: int = 10, taken: set[str] | None = None) -> list[Draft]:
    """Drafts of the ``most`` most asked questions of the report's group ranked ``rank``."""
    groups = {g["rank"]: g for g in report.get("gaps", [])}
    if rank not in groups:
        raise InputError(f"the field report has no group {rank} (it has {len(groups)})",
                         hint="name a rank from the report's gap table")
    group = groups[rank]
    used = set(taken or ())
    base = "field-" + (_SLUG.sub("-", group["label"].lower()).strip("-")[:40] or "group")
    section = group["nearest"][0]["section"] if group["nearest"] else None
    missed = group["by"] == "page" and section is not None
    origin = f"field:{report.get('run_id', '?')} group {rank}"
    drafts = []
    for asked in group["questions"][:most]:
        drafts.append(Draft(
            id=unique_id(base, used), question=asked["question"], gold=(section,) if missed else (),
            gold_answer=None, identifiers=(), origin=origin,
            split=page_split(section.partition("#")[0] if missed else base),
            tags=(DRAFT_TAG, CHECK_TAG), source=section if missed else None,
            expected_cause=None if missed else "not-answerable",
        ))
    return drafts


def drafts_text(drafts: list[Draft], report: dict[str, Any], rank: int) -> str:
    """The file of drafts: a commented YAML list in the golden-set schema."""
    group = next(g for g in report["gaps"] if g["rank"] == rank)
    lines = [
        f"# Drafts from the field, written by `docpilot field draft` from group {rank} of {report.get('log')}:",
        f"# {group['label']!r}, {group['asks']} asks, {group['verdict']}.",
        "# Read each against the docs, trim the question to how users ask it, fix the gold, then move it",
        "# into the golden set with `docpilot golden accept ID... --from THIS_FILE --into evals/golden.yaml`.",
        "",
    ]
    for draft in drafts:
        lines += record_lines(draft_fields(draft))
    return "\n".join(lines)
