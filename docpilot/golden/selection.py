"""Record selection against splits: an `--id` that names a record of another split says which split it is in."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from docpilot.errors import InputError


def check_ids_in_split(records: Sequence, split: str, ids: Sequence[str], path: str | Path | None = None) -> None:
    """Raise when an ``--id`` names a record of the file that the chosen split leaves out.

    ``records`` are every record of the file, in every split. Without this a user who
    asks for ``--split test --id X`` with X in dev reads only "no such record" and
    goes looking for a typo that is not there.
    """
    if split == "all":
        return
    split_of = {record.id: record.split for record in records}
    elsewhere = [(i, split_of[i]) for i in ids if i in split_of and split_of[i] != split]
    if not elsewhere:
        return
    named = ", ".join(f"{record_id} is in the {where} split" for record_id, where in elsewhere)
    splits = sorted({where for _, where in elsewhere})
    fix = f"--split {splits[0]}" if len(splits) == 1 and len(elsewhere) == len(ids) else "--split all"
    raise InputError(f"--split {split} --id: {named}, not in {split}", path=path,
                     hint=f"run with {fix}, or drop the --id of a record outside the {split} split")
