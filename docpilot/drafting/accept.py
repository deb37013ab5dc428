"""Moving reviewed drafts into a golden set: appended as text, so the file keeps every comment, line and order.

The records are appended by the golden set's one writer (``docpilot.drafting.goldfile``),
which reads the whole file back and checks it before it replaces the old one. The
accepted drafts leave the drafts file as line ranges cut out, and their lock moves
with them: the golden set's lock (``golden.lock``) takes each one as the drafts' lock
held it when it was drafted, so a section that changed since shows in ``golden check``.

The draft-only fields (``origin``, ``source``, and ``source_digest`` of drafts written
before the lock) and the tags ``draft`` and ``needs-check`` are dropped: once accepted
the record is the person's. A record takes its page's split: the one the golden set
already gives the page when it gives one, else ``page_split``, so one page never feeds
both dev and test.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from docpilot.drafting.goldfile import append_records
from docpilot.drafting.locking import carry_lock
from docpilot.errors import InputError
from docpilot.golden.draft import CHECK_TAG, DRAFT_TAG, page_split
from docpilot.golden.loading import read_golden
from docpilot.reports.output import write_atomically
from docpilot.schema import GoldenRecord

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus

DRAFT_FIELDS = ("origin", "source", "source_digest")
"""Fields only a draft has, dropped on accept."""
_ORDER = ("id", "question", "gold", "gold_answer", "identifiers", "split", "language", "scope", "expected_cause",
          "tags")
_TURN = ("question", "gold", "gold_answer", "identifiers", "scope", "expected_cause")
"""What each turn of an accepted conversation keeps."""
_HEADER = ("# The golden set. Records below were drafted by `docpilot golden draft` and accepted after review;\n"
           "# `docpilot golden check` checks the file.\n")


def accept_drafts(drafts_path: Path, golden_path: Path, ids: Sequence[str], corpus: Callable[[], Corpus]) -> list[str]:
    """Move the drafts ``ids`` (or ``all``) from ``drafts_path`` to the end of ``golden_path``; lines to print.

    ``corpus`` loads the docs, called only for a draft its drafts' lock does not hold.
    """
    drafts = read_golden(drafts_path).records
    by_id: dict[str, list[GoldenRecord]] = {}  # a draft's id, or a conversation's → its records, one per turn
    for record in drafts:
        by_id.setdefault(record.conversation or record.id, []).append(record)
    wanted = list(by_id) if list(ids) == ["all"] else list(dict.fromkeys(ids))
    missing = [i for i in wanted if i not in by_id]
    if missing:
        near = difflib.get_close_matches(missing[0], list(by_id), n=3)
        raise InputError(f"no draft with id {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                              else ""), path=drafts_path,
                         hint=(f"did you mean {', '.join(near)}? " if near else "") +
                              "name drafts by their id, or `all` for every one")
    existing = read_golden(golden_path).records if golden_path.exists() else []
    taken = {record.conversation or record.id for record in existing} & set(wanted)
    if taken:
        raise InputError(f"the golden set already has a record with id {sorted(taken)[0]!r}", path=golden_path,
                         hint="rename the draft's id in the drafts file, then accept it again")
    splits = _page_splits(existing)
    records = [_accepted(by_id[i], splits) for i in wanted]
    append_records(golden_path, records, _HEADER)
    lock = carry_lock(golden_path, drafts_path, [r for i in wanted for r in by_id[i]], corpus)
    left = _remove(drafts_path, set(wanted))
    return [f"moved {len(records)} draft(s) into {golden_path}: {', '.join(wanted[:10])}"
            + (f" and {len(wanted) - 10} more" if len(wanted) > 10 else ""),
            f"{lock}: their gold locked as it was when drafted (`docpilot golden check` reads it)",
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


def _accepted(records: list[GoldenRecord], splits: dict[str, set[str]]) -> dict:
    """A draft's fields as the golden set holds them; a conversation's with its turns, in the first turn's split."""
    first = records[0]
    split = first.split
    if first.gold:
        page = first.gold[0].partition("#")[0]
        given = splits.get(page, set())
        split = next(iter(given)) if len(given) == 1 else page_split(page)
        splits.setdefault(page, set()).add(split)
    if first.conversation is None:
        return accepted_fields(first, split)
    whole = accepted_fields(first, split)
    turns = [{name: value for name, value in accepted_fields(r, split).items() if name in _TURN}
             | ({"answer_given": r.answer_given} if r.answer_given else {}) for r in records]
    return {"id": first.conversation, **{n: whole[n] for n in ("split", "language", "tags") if n in whole},
            "turns": turns}


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
            begin = starts[n]
            while n and lines[begin - 1].lstrip().startswith("#"):
                begin -= 1  # and so are those just above this one (a drafted conversation's note)
            cut.update(range(begin, end))
    write_atomically(path, "\n".join(line for n, line in enumerate(lines) if n not in cut), "drafts")
    return len(items) - len(ids)
