"""A report of golden conversations for the readout tests: the small report with five rows made turns."""

from __future__ import annotations

from docpilot.reports.report import load_report, rescore
from docpilot.schema import Report
from tests.conftest import DATA

SMALL = DATA / "reports" / "small.json"

TURNS = {"pos-hit": ("deploy", 1), "pos-miss": ("deploy", 2), "pos-refused": ("deploy", 3),
         "neg-answered": ("billing", 1), "pos-invented": ("billing", 2)}
"""The small report's rows that become turns of two conversations; the others stay single questions."""


def conversation_report() -> Report:
    """The small report with five of its rows turns of two conversations (ids ``<conversation>/<turn>``),
    re-scored as a run would score them."""
    report = load_report(SMALL)
    rows = []
    for row in report.rows:
        if row.id in TURNS:
            conversation, turn = TURNS[row.id]
            update = {"id": f"{conversation}/{turn}", "conversation": conversation, "turn": turn}
            if turn > 1:
                update["retrieval_query"] = f"{row.question} (after turn {turn - 1})"
            row = row.model_copy(update=update)
        rows.append(row)
    return rescore(report.model_copy(update={"rows": rows}))
