"""Errored records grouped by cause (docpilot/reports/faults.py)."""

from __future__ import annotations

from docpilot.reports.faults import fault_cause, group_faults
from docpilot.schema import Row

UNFINISHED = ("the service closed the stream with [DONE] but never said the turn finished (no finish_reason in 2 "
              "chunks), with no answer text; fix: run that server with --interrupt_requests False")


def _row(id: str, error: str | None) -> Row:
    return Row(id=id, kind="positive", split="dev", question="q?", error=error)


def test_faults_are_grouped_by_cause_largest_first_with_the_first_message() -> None:
    rows = [
        _row("a", "HTTP 401 from http://127.0.0.1:1/v1/chat/completions: bad key; fix: check DOCPILOT_API_KEY"),
        _row("b", UNFINISHED),
        _row("c", None),
        _row("d", UNFINISHED.replace("2 chunks", "5 chunks")),
        _row("e", "no complete reply from http://x/v1 within timeout_s=60 s (3 chunks received); fix: raise it"),
    ]
    groups = group_faults(rows)
    assert [(g.cause, g.count, g.first_record) for g in groups] == [
        ("the service ended turns without finishing them (no finish_reason)", 2, "b"),
        ("HTTP 401 from the service", 1, "a"),
        ("no complete reply in time", 1, "e"),
    ]
    assert groups[0].first_message == UNFINISHED


def test_an_unknown_fault_is_named_by_its_first_clause() -> None:
    assert fault_cause("the disk is full: cannot write") == "the disk is full"
    assert group_faults([_row("a", None)]) == []
