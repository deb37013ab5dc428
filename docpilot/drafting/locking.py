"""Writing the lock beside a golden set: ``golden lock``, ``golden accept`` and ``golden check --fix``.

The lock (``docpilot.golden.lock``) says what the docs held under each record's gold
when a person last read it, so it is written only when a person says so: ``golden
lock`` (every record, or the ones named after reading them again), ``golden accept``
(the records it moves in, as they were locked when drafted), and ``golden check
--fix`` (only the entries it moved, whose text is the same under their new id).
Everything else in it waits for a person: a changed or gone record keeps its lock
until someone reads it and locks it again.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from docpilot.drafting.goldfile import replace_gold
from docpilot.errors import InputError
from docpilot.golden.gold_state import lock_path, read_lock_beside
from docpilot.golden.loading import corpus_problems, read_golden
from docpilot.golden.lock import (
    GoldLock,
    LockedRecord,
    build_lock,
    lock_entry,
    lock_record,
    lock_text,
)
from docpilot.golden.staleness import find_stale
from docpilot.reports.output import write_atomically
from docpilot.userfiles.userfile import raise_all

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus
    from docpilot.schema import GoldenRecord


@dataclass(frozen=True)
class Locked:
    """What ``lock_golden`` wrote."""

    path: Path
    """The lock file."""
    records: int
    """Records locked afresh."""
    entries: int
    """Their gold entries."""
    kept: int
    """Records whose earlier lock was kept (not named)."""
    refreshed: list[str]
    """Records locked afresh whose gold had moved, changed or gone under the earlier lock."""


def lock_golden(golden: Path, corpus: Corpus, ids: Sequence[str] = ()) -> Locked:
    """Lock every record of the set at ``golden`` (or only ``ids``) against ``corpus``, and write the lock.

    Every gold entry locked must name something in the docs; one that does not stops
    the lock with the record's line and the fix, and nothing is written.
    """
    records = read_golden(golden).records
    chosen = _chosen(records, ids, golden)
    raise_all(corpus_problems(chosen, corpus, golden))
    earlier = read_lock_beside(golden)
    only = {r.id for r in chosen} if ids else None
    lock = build_lock(records, corpus, keep=earlier, only=only)
    stale = {f.id for f in find_stale(earlier, chosen, corpus) if f.stale} if earlier is not None else set()
    path = write_atomically(lock_path(golden), lock_text(lock), "golden lock")
    fresh = [r for r in chosen if r.id in lock.records]
    return Locked(path=path, records=len(fresh), entries=sum(len(lock.records[r.id].gold) for r in fresh),
                  kept=len(lock.records) - len(fresh), refreshed=[r.id for r in chosen if r.id in stale])


def fix_moved(golden: Path, corpus: Corpus) -> dict[str, dict[str, str]]:
    """Rewrite every moved gold entry of the set in place and lock the new ids; record id → {old → new}.

    Only moved entries are written, in the file and in the lock: the lock of every other
    entry, changed and gone ones included, stays as it was, for a person to read.
    """
    lock = read_lock_beside(golden)
    if lock is None:
        raise InputError("has no lock beside it, so nothing can be said to have moved", path=golden,
                         hint="run `docpilot golden lock` to lock the set against the docs as they are now")
    records = read_golden(golden).records
    moves = {f.id: f.moves for f in find_stale(lock, records, corpus) if f.moves}
    if not moves:
        return {}
    replace_gold(golden, moves)
    fixed = dict(lock.records)
    for record_id, moved in moves.items():
        locked = lock.records[record_id]
        gold = {moved.get(entry, entry): (lock_entry(moved[entry], corpus) if entry in moved else was)
                for entry, was in locked.gold.items()}
        fixed[record_id] = locked.model_copy(update={"gold": gold})
    write_atomically(lock_path(golden), lock_text(GoldLock(records=fixed)), "golden lock")
    return moves


def carry_lock(golden: Path, drafts: Path, accepted: Sequence[GoldenRecord],
               corpus: Callable[[], Corpus]) -> Path:
    """Lock the records ``golden accept`` moved in, as the drafts' lock holds them, and take them out of it.

    A draft the drafts' lock does not hold is locked against the docs as they are now
    (``corpus`` loads them, only then). Records already in the golden set's lock keep theirs.
    """
    from_drafts = read_lock_beside(drafts)
    carried = from_drafts.records if from_drafts is not None else {}
    target = read_lock_beside(golden)
    records = dict(target.records) if target is not None else {}
    docs: Corpus | None = None
    for record in accepted:
        entry: LockedRecord | None = carried.get(record.id)
        if entry is None or list(entry.gold) != list(dict.fromkeys(record.gold)):
            docs = docs or corpus()
            entry = lock_record(record, docs)
        if entry is not None:
            records[record.id] = entry
    path = write_atomically(lock_path(golden), lock_text(GoldLock(records=records)), "golden lock")
    if from_drafts is not None:
        left = {k: v for k, v in carried.items() if k not in {r.id for r in accepted}}
        write_atomically(lock_path(drafts), lock_text(GoldLock(records=left)), "golden lock")
    return path


def _chosen(records: list[GoldenRecord], ids: Sequence[str], golden: Path) -> list[GoldenRecord]:
    """The records ``ids`` name: a record, a turn (``<id>/<turn>``), or every turn of a conversation."""
    if not ids:
        return list(records)
    by_id = {r.id: [r] for r in records}
    for record in records:
        if record.conversation is not None and record.conversation not in by_id:
            by_id[record.conversation] = [r for r in records if r.conversation == record.conversation]
    missing = [i for i in ids if i not in by_id]
    if missing:
        near = difflib.get_close_matches(missing[0], list(by_id), n=3)
        raise InputError(f"no record with id {missing[0]!r}", path=golden,
                         hint=(f"did you mean {', '.join(near)}? " if near else "")
                         + "name records by their id (a conversation's id locks all its turns, `<id>/<turn>` one); "
                           "without ids every record is locked")
    return list({r.id: r for i in dict.fromkeys(ids) for r in by_id[i]}.values())
