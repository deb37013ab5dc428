"""Errored records: turns that a model or network fault cut short.

errors = |{ rows : row.error is not None }|

An errored record is neither right nor wrong: it is counted on its own and, unless the
run allows errors, fails the run, so a fault is never silently scored as a wrong answer.
"""

from __future__ import annotations

from docpilot.schema import Row


def errored(row: Row) -> int:
    """1 when the record's turn failed, else 0."""
    return int(row.error is not None)
