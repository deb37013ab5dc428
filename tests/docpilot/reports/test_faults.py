"""Errored records grouped by cause (docpilot/reports/faults.py)."""

from __future__ import annotations

from docpilot.reports.faults import fault_cause, group_faults
from docpilot.schema import Row

UNFINISHED = ("the service closed the stream with [DONE] but never said the turn finished (no finish_reason in 2 "
              "chunks), with no answer text; fix: run that server with --interrupt_requests False")


def _row(id: str, error: str | None, code: str | None = None) -> Row:
    return Row(id=id, kind="positive", split="dev", question="q?", error=error, error_code=code)


def test_faults_are_grouped_by_cause_largest_first_with_the_first_message() -> None:
    rows = [
        _row("a", "HTTP 401 from http://127.0.0.1:1/v1/chat/completions: bad key; fix: check DOCPILOT_API_KEY", "auth"),
        _row("b", UNFINISHED, "unfinished"),
        _row("c", None),
        _row("d", UNFINISHED.replace("2 chunks", "5 chunks"), "unfinished"),
        _row("e", "no complete reply from http://x/v1 within timeout_s=60 s (3 chunks received); fix: raise it",
             "timeout"),
    ]
    groups = group_faults(rows)
    assert [(g.cause, g.count, g.first_record) for g in groups] == [
        ("the service ended turns without finishing them (no finish_reason)", 2, "b"),
        ("the service refused the credentials (HTTP 401 or 403)", 1, "a"),
        ("no complete reply in time", 1, "e"),
    ]
    assert groups[0].first_message == UNFINISHED


# Regression: faults were grouped by matching words of their messages, so a message that
# mentioned another fault's words (a timeout hint in a connection error) joined its group.
def test_the_code_decides_the_group_whatever_the_message_says() -> None:
    rows = [
        _row("a", "cannot get a reply from http://x/v1 (ServerTimeoutError: timeout); fix: check base_url", "connect"),
        _row("b", "HTTP 500 from http://x/v1: no finish_reason configured; fix: retry later", "http_status"),
    ]
    assert [g.cause for g in group_faults(rows)] == ["the service could not be reached", "HTTP errors from the service"]


def test_a_row_without_a_code_is_named_by_its_first_clause() -> None:
    assert fault_cause(_row("a", "the disk is full: cannot write")) == "the disk is full"
    assert group_faults([_row("a", None)]) == []
