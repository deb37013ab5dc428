"""Where a golden set's lock is, and what a run reads of it: each record's gold state, and the scorecard's count.

A run imports this module alone. A set without a lock beside it costs the run one
``stat`` per shard and nothing else; the lock's model and the comparison with the docs
(``docpilot.golden.lock``, ``docpilot.golden.staleness``) are loaded only when there
is a lock to read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus
    from docpilot.golden.lock import GoldLock
    from docpilot.schema import GoldenRecord, Row

LOCK_SUFFIX = ".lock"
"""The lock of ``evals/golden.yaml`` is ``evals/golden.lock``."""


def lock_path(golden: str | Path) -> Path:
    """Where the lock of a golden set lives: beside it, its name's suffix replaced by ``.lock``."""
    return Path(golden).with_suffix(LOCK_SUFFIX)


def read_lock_beside(golden: str | Path) -> GoldLock | None:
    """The lock beside a golden set, or None when there is none."""
    path = lock_path(golden)
    if not path.exists():
        return None
    from docpilot.golden.lock import read_lock

    return read_lock(path)


def gold_states(golden: str | Path, records: Sequence[GoldenRecord], corpus: Corpus) -> dict[str, str]:
    """Each record whose gold is stale by the lock beside ``golden``, with its state; empty without a lock."""
    lock = read_lock_beside(golden)
    if lock is None:
        return {}
    from docpilot.golden.staleness import find_stale

    return {f.id: str(f.state) for f in find_stale(lock, records, corpus) if f.stale}


def locked_entries(golden: str | Path) -> set[tuple[str, str]]:
    """The (record id, gold entry) pairs the lock beside ``golden`` holds; empty without a lock.

    An entry that names nothing in the docs but is locked is stale gold (moved or gone),
    which the lock explains: a run marks it instead of refusing the set.
    """
    lock = read_lock_beside(golden)
    return set() if lock is None else {(i, entry) for i, locked in lock.records.items() for entry in locked.gold}


def stale_gold_line(rows: Iterable[Row]) -> str | None:
    """The scorecard's line on stale gold: how many records and in which states; None when there is none."""
    states = Counter(row.gold_state for row in rows if row.gold_state is not None)
    if not states:
        return None
    total = sum(states.values())
    counts = ", ".join(f"{state} {count}" for state, count in states.most_common())
    return (f"stale gold: {total} record(s) ({counts}) are scored against gold the docs moved, changed or "
            "removed since the golden set was locked; their misses are the docs', not the assistant's: "
            "`docpilot golden check` names them, `--fix` rewrites moved ids")
