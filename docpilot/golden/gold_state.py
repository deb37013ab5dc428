"""What a run reads of a golden set's lock: each record's gold state, and the scorecard's count of them.

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
    from docpilot.schema import GoldenRecord, Row

LOCK_SUFFIX = ".lock"
"""The lock of ``evals/golden.yaml`` is ``evals/golden.lock``."""
STALE: tuple[str, ...] = ("gone", "moved", "changed")
"""The states a run marks in a row's ``gold_state``, worst first (``docpilot.golden.staleness``)."""


def lock_path(golden: str | Path) -> Path:
    """Where the lock of a golden set lives: beside it, its name's suffix replaced by ``.lock``."""
    return Path(golden).with_suffix(LOCK_SUFFIX)


def gold_states(golden: str | Path, records: Sequence[GoldenRecord], corpus: Corpus) -> dict[str, str]:
    """Each record whose gold is stale by the lock beside ``golden``, with its state; empty without a lock."""
    path = lock_path(golden)
    if not path.exists():
        return {}
    from docpilot.golden.lock import read_lock
    from docpilot.golden.staleness import find_stale

    findings = find_stale(read_lock(path), records, corpus)
    return {f.id: str(f.state) for f in findings if f.stale}


def stale_gold_line(rows: Iterable[Row]) -> str | None:
    """The scorecard's line on stale gold: how many records and in which states; None when there is none."""
    states = Counter(row.gold_state for row in rows if row.gold_state is not None)
    if not states:
        return None
    total = sum(states.values())
    counts = ", ".join(f"{state} {states[state]}" for state in STALE if states[state])
    return (f"stale gold: {total} record(s) ({counts}) are scored against gold the docs moved, changed or "
            "removed since the golden set was locked; their misses are the docs', not the assistant's: "
            "`docpilot golden check` names them, `--fix` rewrites moved ids")
