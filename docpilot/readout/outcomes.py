"""What the readable reports (HTML, JUnit XML, Markdown) share: each record's outcome and the previous run.

A *readout* is a report prepared for reading: for every record, whether it failed
and why (the failure taxonomy of ``docpilot.improve.taxonomy``), the rank of its
first gold section and its answer F1; and each metric's move since the previous
comparable run (``docpilot.reports.store``). The three formats render the same
readout, so they never disagree about which records failed. Writing them to files
is ``docpilot.readout.files``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from docpilot.errors import ReportError
from docpilot.history.timeline import Timeline
from docpilot.improve.taxonomy import causes_of, describe, run_settings
from docpilot.metrics.answer import answer_f1
from docpilot.metrics.retrieval import first_found
from docpilot.readout.trend import report_trend
from docpilot.reports.moves import metric_moves
from docpilot.reports.store import ReportStore, comparison_key
from docpilot.schema import Report, Row

Change = Literal["better", "worse", "same"]


@dataclass(frozen=True)
class RecordOutcome:
    """One record as the readable reports show it."""

    row: Row
    """The report's row."""
    anchor: str
    """HTML id of the record's details, unique within the report."""
    first_gold_rank: int | None
    """1-based rank of the first gold section in the top 8; None when none is there or not a positive."""
    f1: float | None
    """Answer F1, for positives with a gold answer in a run that called the model."""
    cause: str | None
    """Why the record fails (a cause id of the failure taxonomy); None when it passes."""
    detail: str = ""
    """The facts behind the cause, in one line."""
    also: tuple[str, ...] = ()
    """Further causes that hold as well."""
    gates: tuple[str, ...] = ()
    """Metric ids of failed gates that name this record."""

    @property
    def failing(self) -> bool:
        """Whether the record fails its question or breaks a failed gate."""
        return self.cause is not None or bool(self.gates)

    @property
    def hit(self) -> bool | None:
        """Whether gold was in the top 8; None for a record that is not a positive."""
        if self.row.kind != "positive" or not self.row.gold:
            return None
        return self.first_gold_rank is not None


@dataclass(frozen=True)
class MetricMove:
    """One metric's value in the previous comparable run, and the move since."""

    previous: float | int | None
    """The previous run's value."""
    delta: float | None
    """This run's value minus the previous one; None when either is null."""
    direction: Literal["up", "down", "same"] | None
    """Which way the value went; `same` below the metric's noise floor; None when it cannot be told."""
    change: Change | None
    """Whether the move is good or bad for the metric; `same` below the noise floor; None when it cannot be told."""

    def text(self, shown: str) -> str:
        """The move in words: `+0.125 ↑ better`, `−40 ms ↓ better`, `= same`; ``shown`` is |delta| formatted."""
        if self.change == "same":
            return "= same"
        if self.delta is None or self.direction is None:
            return ""
        sign, arrow = ("+", "↑") if self.direction == "up" else ("−", "↓")
        return f"{sign}{shown} {arrow} {self.change or ''}".rstrip()


@dataclass(frozen=True)
class Readout:
    """A report prepared for reading."""

    report: Report
    """The report itself."""
    records: list[RecordOutcome]
    """One outcome per row, in report order."""
    previous_run: str | None = None
    """Run id of the previous comparable run; None when there is none or no store to ask."""
    comparison_note: str | None = None
    """One line on what the moves compare with; None when no store was available."""
    moves: dict[str, MetricMove] = field(default_factory=dict)
    """Metric id → its move; empty when there is no previous comparable run."""
    trend: Timeline | None = None
    """The stored runs of the report's series up to it (``docpilot.readout.trend``); None when none are indexed."""

    @property
    def failing(self) -> list[RecordOutcome]:
        """The failing records, in report order."""
        return [record for record in self.records if record.failing]


def failing_ids(report: Report) -> list[str]:
    """The ids of the run's failing records, in report order: those ``docpilot improve`` lists.

    A record fails when a cause of the failure taxonomy holds for it
    (``improve.taxonomy.causes_of``) or a failed gate names it; the scorecard's count,
    the HTML and Markdown readouts and ``improve`` all read this one rule.
    """
    run = run_settings(report)
    failed_gates = _failed_gate_records(report)
    return [row.id for row in report.rows if row.id in failed_gates or causes_of(row, run)]


def prepare_readout(
    report: Report, *, report_path: str | Path | None = None, reports_dir: str | Path | None = None
) -> Readout:
    """The readout of ``report``: outcomes, causes, and moves since the previous comparable run.

    The previous run is looked for in ``reports_dir`` when given, else in the folder
    of ``report_path`` and the report's own ``reports_dir`` setting.
    """
    run = run_settings(report)
    failed_gates = _failed_gate_records(report)
    anchors = _anchors(row.id for row in report.rows)
    records = []
    for row, anchor in zip(report.rows, anchors, strict=True):
        found = causes_of(row, run)
        cause, detail, also = (found[0], describe(row, found[0], run), tuple(found[1:])) if found else (None, "", ())
        records.append(RecordOutcome(
            row=row, anchor=anchor, first_gold_rank=_first_gold_rank(row), f1=_f1(row, report.gate_only),
            cause=cause, detail=detail, also=also, gates=tuple(failed_gates.get(row.id, ())),
        ))
    folders = _folders(report, report_path, reports_dir)
    previous, note, moves = _moves(report, folders)
    return Readout(report=report, records=records, previous_run=previous, comparison_note=note, moves=moves,
                   trend=report_trend(report, folders))




def _first_gold_rank(row: Row) -> int | None:
    if row.kind != "positive" or not row.gold:
        return None
    return first_found(row.retrieved, row.gold)


def _f1(row: Row, gate_only: bool) -> float | None:
    if gate_only or row.kind != "positive" or not row.gold or row.gold_answer is None:
        return None
    return answer_f1(row)


def _failed_gate_records(report: Report) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for gate in report.gates:
        if not gate.passed:
            for record in gate.records:
                found.setdefault(record, []).append(gate.metric)
    return found


def _anchors(ids: Iterable[str]) -> list[str]:
    """HTML ids for record ids: safe characters only, and unique even when two ids clean up alike."""
    seen: set[str] = set()
    anchors = []
    for record_id in ids:
        base = "rec-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", record_id).strip("-") or "record")
        anchor, n = base, 1
        while anchor in seen:
            n += 1
            anchor = f"{base}-{n}"
        seen.add(anchor)
        anchors.append(anchor)
    return anchors


def _folders(report: Report, report_path: str | Path | None, reports_dir: str | Path | None) -> list[Path]:
    if reports_dir is not None:
        return [Path(reports_dir)]
    candidates = []
    if report_path is not None:
        candidates.append(Path(report_path).parent)
    configured = (report.config or {}).get("reports_dir")
    if configured:
        candidates.append(Path(str(configured)))
    unique: dict[Path, Path] = {}
    for folder in candidates:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


def _moves(report: Report, folders: list[Path]) -> tuple[str | None, str | None, dict[str, MetricMove]]:
    """Previous comparable run id, a note on the comparison, and the moves."""
    key = comparison_key(report)
    best = None
    for folder in folders:
        for header in ReportStore(folder):
            if header.run_id == report.run_id or header.created_at > report.created_at:
                continue  # the run itself, or one made after it
            if comparison_key(header) == key:
                if best is None or header.created_at > best.created_at:
                    best = header
                break  # the store lists newest first: the first match is this folder's newest
    shown = ", ".join(str(f) for f in folders) or "no reports folder"
    if best is None:
        return None, (f"No previous comparable run in {shown} (same golden set, set, split, selection, "
                      "gate-only and runtime)"), {}
    try:
        previous = best.load()
    except ReportError as exc:
        return None, f"The previous comparable run {best.run_id} could not be read: {exc}", {}
    moves = {m.metric: MetricMove(previous=m.previous, delta=m.delta, direction=m.direction, change=m.change)
             for m in metric_moves(report, previous)}
    return best.run_id, f"Moves since run {best.run_id} ({best.created_at})", moves
