"""Moving reviewed drafts into a golden set: appended as text, so the file keeps every comment, line and order.

A golden set is a file people write and comment by hand. A YAML round trip keeps
most of it but not all (blank lines, a quoting style, a long line's wrapping), so the
records are appended to the file's text instead, at the indentation its own records
use, and the whole file is read back and checked before it replaces the old one. The
accepted drafts leave the drafts file the same way, line ranges cut out.

The draft-only fields (``origin``, ``source``, ``source_digest``) and the tags
``draft`` and ``needs-check`` are dropped: once accepted the record is the person's.
A record takes its page's split: the one the golden set already gives the page when
it gives one, else ``page_split``, so one page never feeds both dev and test.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from docpilot.errors import InputError
from docpilot.golden.draft import CHECK_TAG, DRAFT_TAG, page_split, record_lines
from docpilot.golden.loading import read_golden
from docpilot.reports.output import write_atomically
from docpilot.schema import GoldenRecord

DRAFT_FIELDS = ("origin", "source", "source_digest")
"""Fields only a draft has, dropped on accept."""
_ORDER = ("id", "question", "gold", "gold_answer", "identifiers", "split", "language", "scope", "expected_cause",
          "tags")
_HEADER = ("# The golden set. Records below were drafted by `docpilot golden draft` and accepted after review;\n"
           "# `docpilot golden check` checks the file.\n")


def accept_drafts(drafts_path: Path, golden_path: Path, ids: Sequence[str]) -> list[str]:
    """Move the drafts ``ids`` (or ``all``) from ``drafts_path`` to the end of ``golden_path``; lines to print."""
    drafts = read_golden(drafts_path).records
    by_id = {record.id: record for record in drafts}
    wanted = list(by_id) if list(ids) == ["all"] else list(dict.fromkeys(ids))
    missing = [i for i in wanted if i not in by_id]
    if missing:
        near = difflib.get_close_matches(missing[0], list(by_id), n=3)
        raise InputError(f"no draft with id {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                              else ""), path=drafts_path,
                         hint=(f"did you mean {', '.join(near)}? " if near else "") +
                              "name drafts by their id, or `all` for every one")
    existing = read_golden(golden_path).records if golden_path.exists() else []
    taken = {record.id for record in existing} & set(wanted)
    if taken:
        raise InputError(f"the golden set already has a record with id {sorted(taken)[0]!r}", path=golden_path,
                         hint="rename the draft's id in the drafts file, then accept it again")
    splits = _page_splits(existing)
    records = [_accepted(by_id[i], splits) for i in wanted]
    _append(golden_path, records)
    left = _remove(drafts_path, set(wanted))
    return [f"moved {len(records)} draft(s) into {golden_path}: {', '.join(wanted[:10])}"
            + (f" and {len(wanted) - 10} more" if len(wanted) > 10 else ""),
            f"{drafts_path}: {left} draft(s) left to review"]


def accepted_fields(record: GoldenRecord, split: str) -> dict:
    """The record as the golden set holds it: draft-only fields and tags dropped, empty fields left out."""
    data = record.model_dump()
    data["split"] = split
    data["tags"] = [tag for tag in record.tags if tag not in (DRAFT_TAG, CHECK_TAG)]
    return {name: data[name] for name in _ORDER if name == "gold" or data.get(name) not in (None, [], "")}


def _page_splits(records: Sequence[GoldenRecord]) -> dict[str, set[str]]:
    splits: dict[str, set[str]] = {}
    for record in records:
        for entry in record.gold:
            splits.setdefault(entry.partition("#")[0], set()).add(record.split)
    return splits


def _accepted(record: GoldenRecord, splits: dict[str, set[str]]) -> dict:
    if not record.gold:
        return accepted_fields(record, record.split)
    page = record.gold[0].partition("#")[0]
    given = splits.get(page, set())
    split = next(iter(given)) if len(given) == 1 else page_split(page)
    splits.setdefault(page, set()).add(split)
    return accepted_fields(record, split)


def _append(path: Path, records: list[dict]) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        added = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    elif suffix in (".yaml", ".yml"):
        indent = _item_indent(text, path)
        added = "\n" + "\n".join(line for r in records for line in record_lines(r, indent))
    else:
        raise InputError("accept appends to a YAML or JSONL golden set only", path=path,
                         hint="convert the set to YAML, or copy the drafts' fields into the file by hand")
    if text and not text.endswith("\n"):
        text += "\n"
    _write_checked(path, text + added)


def _item_indent(text: str, path: Path) -> str:
    """The white space before the ``- `` of the file's records (none for a top-level list)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        root = None  # read_golden reported it already; unreachable for a checked file
    if isinstance(root, yaml.MappingNode):
        root = next((v for k, v in root.value if k.value == "records"), None)
    if root is None:
        return ""
    if not isinstance(root, yaml.SequenceNode) or root.flow_style:
        raise InputError("the records are written as one flow list ([...]), which cannot be appended to",
                         path=path, hint="write the records as a block list, each starting with '- id: ...'")
    if not root.value:
        return ""
    line = text.split("\n")[root.value[0].start_mark.line]
    found = re.match(r"^(\s*)-\s", line)
    return found.group(1) if found else ""


def _write_checked(path: Path, text: str) -> None:
    """Check the new text as a golden set, then replace the file with it (keeping its mode)."""
    with tempfile.TemporaryDirectory(prefix="docpilot-accept-") as folder:
        trial = Path(folder) / path.name
        trial.write_text(text, encoding="utf-8")
        read_golden(trial)  # raises naming the trial's line: the text appended is at fault
    mode = os.stat(path).st_mode & 0o7777 if path.exists() else None
    write_atomically(path, text, "golden set", mode=mode)


def _remove(path: Path, ids: set[str]) -> int:
    """Cut the records ``ids`` out of the drafts file's text; how many records are left."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        kept = [line for line in lines if not (line.strip() and json.loads(line).get("id") in ids)]
        write_atomically(path, "\n".join(kept), "drafts")
        return sum(bool(line.strip()) for line in kept)
    root = yaml.compose(text)
    if isinstance(root, yaml.MappingNode):
        root = next(v for k, v in root.value if k.value == "records")
    items = root.value
    starts = [item.start_mark.line for item in items] + [len(lines)]
    cut: set[int] = set()
    for n, item in enumerate(items):
        key = next((v.value for k, v in item.value if k.value == "id"), None) if isinstance(item, yaml.MappingNode) \
            else None
        if key in ids:
            end = starts[n + 1]
            while end > starts[n] + 1 and lines[end - 1].lstrip().startswith("#"):
                end -= 1  # comments just above the next record are that record's
            cut.update(range(starts[n], end))
    write_atomically(path, "\n".join(line for n, line in enumerate(lines) if n not in cut), "drafts")
    return len(items) - len(ids)
