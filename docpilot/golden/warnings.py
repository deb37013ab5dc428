"""Warnings about golden records: what lets a record run but weakens a number.

A negative that carries a reference answer (common in sets written for other tools),
a positive without one, a negative that does not say why it should be refused. Each
is reported with its record and line by ``docpilot golden check``, and summed up in
one line per kind by ``docpilot eval``. A conversation is warned about turn by turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from docpilot.schema import GoldenRecord, turn_id
from docpilot.userfiles.userfile import Problem, show

Warned = tuple[str, str, str]
"""(kind, what is weak, how to make it strong)."""

WARNING_KINDS: dict[str, str] = {
    "negative-with-answer": "negatives carry a gold_answer: kept and shown with the record, never scored",
    "positive-without-answer": "positives have no gold_answer: answer_f1 leaves them out",
    "negative-without-cause": "negatives have no expected_cause: no_answer_precision cannot judge their refusals",
    "answer-given-unused": "conversations give an answer_given on their last turn: no turn follows, so it is "
                           "never used",
}
"""Warning kind → what it means, in the words a run's one-line summary of it uses."""


@dataclass(frozen=True)
class GoldenWarning:
    """Something that lets a record run but weakens a number: its kind and where it is."""

    kind: str
    """A key of ``WARNING_KINDS``."""
    problem: Problem
    """The record, what is weak and how to make it strong."""
    turn: int | None = None
    """For a turn of a conversation: its number (the problem names the conversation and the turn)."""

    @property
    def record_id(self) -> str:
        """The id of the record warned about: a turn's own id, ``<conversation>/<turn>``, for a turn."""
        record = self.problem.record or "?"
        return record if self.turn is None else turn_id(record, self.turn)


def golden_warnings(record: GoldenRecord) -> list[Warned]:
    """What weakens a number about one valid record: (kind, what, fix) each."""
    if not record.gold and record.gold_answer:
        return [("negative-with-answer",
                 f"a negative (empty gold) carries a gold_answer {show(record.gold_answer)}: it is kept and shown "
                 "with the record, never scored",
                 "nothing to do for a set written for another tool; list the gold entries the answer comes from "
                 "to make the record a positive")]
    if record.gold and record.gold_answer is None:
        return [("positive-without-answer", "a positive has no gold_answer, so answer_f1 leaves it out",
                 "add `gold_answer:`, the answer at the length answers should have")]
    if not record.gold and record.expected_cause is None:
        return [("negative-without-cause",
                 "a negative has no expected_cause, so no_answer_precision cannot judge its refusal",
                 "add `expected_cause:` not-answerable, out-of-scope or unsafe")]
    return []


def conversation_warnings(last: GoldenRecord) -> list[Warned]:
    """What weakens a conversation as a whole, read from its last turn: a reply fixed that nothing follows."""
    if last.answer_given is None:
        return []
    return [("answer-given-unused",
             "the last turn has an answer_given, but no turn is asked after it, so it is never used",
             "remove it, or add the turn it was meant to come before")]


def warning_lines(warnings: Sequence[GoldenWarning], path: str | Path, shown: int = 5) -> list[str]:
    """One line per kind of warning, with how many records and the first ids: what a run prints."""
    lines = []
    for kind, meaning in WARNING_KINDS.items():
        ids = [w.record_id for w in warnings if w.kind == kind]
        if ids:
            more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
            lines.append(f"{path}: {len(ids)} {meaning} ({', '.join(ids[:shown])}{more})")
    return lines
