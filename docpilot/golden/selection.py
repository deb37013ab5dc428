"""Which records of a golden set a run asks: by id, by tag, the first N, and never half a conversation.

A conversation is read as one record per turn (``<id>/<turn>``), and a follow-up
cannot be asked without the turns before it, so a selection keeps turns in whole
leading runs:

- ``--id CONV`` keeps every turn of the conversation;
- ``--id CONV/N`` keeps turn N and the turns before it (1 … N);
- ``--tag`` keeps whole conversations, since tags belong to the conversation;
- ``--limit N`` keeps the first N records of the file, a conversation counting as one
  record with all its turns.

An ``--id`` that names a record of another split says which split it is in.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from docpilot.errors import InputError
from docpilot.schema import GoldenRecord, Selection


def select_records(records: Sequence[GoldenRecord], selection: Selection,
                   path: str | Path | None = None) -> list[GoldenRecord]:
    """The records a selection keeps, in file order: any of its ids, then any of its tags, then the first N.

    An id the records do not hold, a tag none of them carries, or a selection that
    keeps nothing is an InputError naming what to choose from.
    """
    if selection.everything:
        return list(records)
    kept = list(records)
    if selection.ids:
        chosen = chosen_ids(records, selection.ids, path)
        kept = [r for r in kept if r.id in chosen]
    if selection.tags:
        known_tags = sorted({t for r in records for t in r.tags})
        missing = [t for t in selection.tags if t not in known_tags]
        if missing:
            shown = ", ".join(known_tags[:20]) or "none: no record has tags"
            raise InputError(f"--tag {', '.join(missing)}: no record in this split carries it", path=path,
                             hint=f"tags in use: {shown}")
        wanted = set(selection.tags)
        kept = [r for r in kept if wanted.intersection(r.tags)]
    if selection.limit is not None:
        kept = [r for unit in units(kept)[: selection.limit] for r in unit]
    if not kept:
        raise InputError(f"the selection {selection.describe()} keeps no record", path=path,
                         hint="an --id and a --tag both apply: choose records that match both, or drop one")
    return kept


def chosen_ids(records: Sequence[GoldenRecord], ids: Sequence[str], path: str | Path | None = None) -> set[str]:
    """The record ids ``--id`` chooses: a record's own, every turn of a conversation, a turn and the turns before it."""
    by_conversation: dict[str, list[GoldenRecord]] = {}
    for record in records:
        if record.conversation is not None:
            by_conversation.setdefault(record.conversation, []).append(record)
    plain = {r.id for r in records if r.conversation is None}
    turns = {r.id: r for r in records if r.conversation is not None}
    missing = [i for i in ids if i not in plain and i not in by_conversation and i not in turns]
    if missing:
        known = sorted(plain | set(by_conversation) | set(turns))
        near = difflib.get_close_matches(missing[0], known, n=3)
        raise InputError(f"--id {', '.join(missing)}: no such record in this split", path=path,
                         hint=(f"did you mean {', '.join(near)}? " if near else "")
                         + "ids are the records' `id` fields, a conversation's id, or a turn's `<id>/<turn>`; "
                           "`docpilot golden check` lists the set")
    chosen: set[str] = set()
    for wanted in ids:
        if wanted in plain:
            chosen.add(wanted)
        elif wanted in by_conversation:
            chosen.update(r.id for r in by_conversation[wanted])
        else:
            turn = turns[wanted]  # a follow-up is asked after the turns before it, so they come along
            chosen.update(r.id for r in by_conversation[turn.conversation] if (r.turn or 0) <= (turn.turn or 0))
    return chosen


def units(records: Sequence[GoldenRecord]) -> list[list[GoldenRecord]]:
    """The records in file order, a single question alone and a conversation's turns together."""
    grouped: list[list[GoldenRecord]] = []
    for record in records:
        if record.conversation is not None and grouped and grouped[-1][0].conversation == record.conversation:
            grouped[-1].append(record)
        else:
            grouped.append([record])
    return grouped


def check_ids_in_split(records: Sequence, split: str, ids: Sequence[str], path: str | Path | None = None) -> None:
    """Raise when an ``--id`` names a record of the file that the chosen split leaves out.

    ``records`` are every record of the file, in every split; an id may name a record,
    a conversation or a turn. Without this a user who asks for ``--split test --id X``
    with X in dev reads only "no such record" and goes looking for a typo that is not there.
    """
    if split == "all":
        return
    split_of = {record.id: record.split for record in records}
    split_of.update({record.conversation: record.split for record in records
                     if getattr(record, "conversation", None) is not None})
    elsewhere = [(i, split_of[i]) for i in ids if i in split_of and split_of[i] != split]
    if not elsewhere:
        return
    named = ", ".join(f"{record_id} is in the {where} split" for record_id, where in elsewhere)
    splits = sorted({where for _, where in elsewhere})
    fix = f"--split {splits[0]}" if len(splits) == 1 and len(elsewhere) == len(ids) else "--split all"
    raise InputError(f"--split {split} --id: {named}, not in {split}", path=path,
                     hint=f"run with {fix}, or drop the --id of a record outside the {split} split")
