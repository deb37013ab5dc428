"""A metric across the comparable runs: its values, the runs where it moved, and what changed at each.

A *series* is the runs that share the golden set, record set, split, selection, mode
and runtime (``docpilot.reports.store.COMPARABLE_FIELDS``): only their numbers can be
set side by side. Each run is compared with the run before it in its series exactly
as ``docpilot status`` compares the last two (``docpilot.reports.moves``): a change
below the metric's noise floor is no move. At a run where some metric moved, the
cause is what differs between the two runs, in the words of ``docpilot improve
compare``: which fingerprints changed, each setting old → new, the pages of the
docs, the model, and the DocPilot version.

A run where gold went stale (rows whose ``gold_state`` says the docs moved, changed or
removed what a record's gold names since the golden set was locked) is marked: its
cause says so when a metric moved there, and a note names it when none did, so a drop
that came with the docs moving under the gold never reads as the assistant's.

A run's comparison with the one before it never changes while neither report does,
so it is worked out once and kept in the run index (``pairs``); a reader of a long,
unchanged series then loads no report, no metric and no statistics code at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docpilot.errors import InputError, ReportError
from docpilot.history.index import RunIndex
from docpilot.history.run import IndexedRun

DEFAULT_LAST = 30
"""Runs shown when ``--last`` is not given."""

MoveData = dict[str, Any]
"""One metric's move as stored: ``docpilot.reports.moves.Move`` fields and ``text``, the move in words."""


@dataclass(frozen=True)
class Step:
    """One run of the series, with each chosen metric's move since the run before it."""

    run: IndexedRun
    """The run."""
    previous: IndexedRun | None
    """The run before it in the series; None for the series' first run."""
    moves: dict[str, MoveData]
    """Metric id → its move since ``previous`` (``change`` None when there is no previous run)."""
    cause: dict[str, Any] | None
    """What differs from ``previous`` (``changed``, ``settings``, ``pages``, ``model``, ``version`` and their
    ``lines``); None when no chosen metric moved beyond its floor, or there is no previous run."""

    @property
    def moved(self) -> list[str]:
        """The chosen metrics that moved beyond their noise floor here, in metric order."""
        return [metric for metric, move in self.moves.items() if _is_move(move)]


@dataclass
class Timeline:
    """The shown runs of one series and the chosen metrics across them."""

    metrics: list[str]
    """The metric ids shown, in order."""
    steps: list[Step]
    """The shown runs, oldest first."""
    series_runs: int
    """How many runs the whole series holds up to the latest one (``steps`` may show fewer)."""
    latest: IndexedRun
    """The run the series was chosen by."""
    notes: list[str] = field(default_factory=list)
    """What a reader should know: runs of other series left out, a window that is empty."""

    def values(self, metric: str) -> list[float | int | None]:
        """The metric's value at each shown run, oldest first."""
        return [step.run.summary.get(metric) for step in self.steps]

    def describe(self) -> dict[str, object]:
        """The timeline as plain JSON-ready data: each run's values, and each move with its cause."""
        return {
            "series": {"golden": self.latest.golden, "set": self.latest.record_set, "split": self.latest.split,
                       "selection": self.latest.selection, "gate_only": self.latest.gate_only,
                       "runtime": self.latest.runtime, "runs": self.series_runs},
            "metrics": self.metrics,
            "runs": [{**step.run.describe(), "values": {m: step.run.summary.get(m) for m in self.metrics},
                      "stale_gold": step.run.stale_gold} for step in self.steps],
            "moves": [{"run_id": step.run.run_id, "created_at": step.run.created_at,
                       "previous": step.previous.run_id if step.previous else None,
                       "metrics": {m: {k: v for k, v in step.moves[m].items() if k != "text"} for m in step.moved},
                       "cause": step.cause}
                      for step in self.steps if step.moved],
            "notes": self.notes,
        }


def latest_run(index: RunIndex) -> IndexedRun:
    """The newest run of the index; ReportError when the folder holds no readable report."""
    latest = index.latest()
    if latest is None:
        raise ReportError(f"{index.root}: no readable report; run `docpilot eval` first, or pass --reports DIR")
    return latest


def choose_metrics(latest: IndexedRun, asked: tuple[str, ...] | list[str]) -> list[str]:
    """The metrics to show: those asked for, each checked against the run's summary, or its headline metrics."""
    if not asked:
        return list(latest.headline)
    unknown = [metric for metric in asked if metric not in latest.summary]
    if unknown:
        raise InputError(f"metric {unknown[0]!r} is not in the summary of run {latest.run_id}",
                         hint=f"name one of: {', '.join(latest.summary)}")
    return list(dict.fromkeys(asked))


def build_timeline(index: RunIndex, metrics: list[str], *, last: int | None = DEFAULT_LAST,
                   since: str | None = None, latest: IndexedRun | None = None) -> Timeline:
    """The series of ``latest`` (default: the newest run) up to it, cut to the runs since ``since`` and the last N."""
    latest = latest or latest_run(index)
    runs = index.series(latest.series)
    notes = []
    others = index.count() - len(runs)
    if others:
        notes.append(f"{others} run(s) of other series left out: a different golden set, record set, split, "
                     "selection, mode or runtime starts a new series")
    # A run that is not the newest sees its series as it stood that night.
    position = next((i for i, run in enumerate(runs) if run.file == latest.file), len(runs) - 1)
    runs = runs[: position + 1]
    start = 0
    if since is not None:
        start = next((i for i, run in enumerate(runs) if run.created_at >= since), len(runs))
    if last is not None:
        start = max(start, len(runs) - last)
    steps = [_step(index, run, runs[i - 1] if i > 0 else None, metrics)
             for i, run in enumerate(runs) if i >= start]
    for step in steps:
        mark = stale_change(step.previous, step.run) if step.cause is None else None
        if mark is not None:  # a run where a metric moved says it in its cause
            notes.append(f"run {step.run.run_id} ({step.run.created_at}): {mark}")
    if not steps:
        notes.append(f"no run of the series was made at or after {since}")
    return Timeline(metrics=metrics, steps=steps, series_runs=len(runs), latest=latest, notes=notes)


def compare_neighbours(before: IndexedRun, after: IndexedRun) -> dict[str, Any]:
    """Every summary metric of ``after`` with its move since ``before``, and what differs between the two runs."""
    from docpilot.reports.moves import metric_moves

    moves = {}
    for move in metric_moves(after, before):  # type: ignore[arg-type]  # reads summary and counts only
        data = move.model_dump()
        data["text"] = move_text(move)
        moves[data.pop("metric")] = data
    return {"moves": moves, "cause": describe_cause(before, after)}


def describe_cause(before: IndexedRun, after: IndexedRun) -> dict[str, Any]:
    """What differs between two runs of a series, as data and as ``improve compare``'s lines."""
    from docpilot.reports.changes import page_changes, setting_changes

    fingerprints_a, fingerprints_b = before.fingerprints, after.fingerprints
    changed = [name for name in ("corpus", "model", "config", "code")
               if fingerprints_a.get(name) != fingerprints_b.get(name)]
    settings = setting_changes(before, after) if "config" in changed else []  # type: ignore[arg-type]
    pages = page_changes(before, after) if "corpus" in changed else None  # type: ignore[arg-type]
    model = [before.model, after.model] if before.model != after.model else None
    version = [before.version, after.version] if before.version != after.version else None
    lines = [f"changed between the runs: {', '.join(changed) or 'nothing'}"]
    stale = stale_change(before, after)
    if model is not None:
        lines.append(f"model {model[0]} → {model[1]}")
    lines += [f"setting {change.describe()}" for change in settings]
    if pages is not None:
        lines.append(f"docs: {pages.describe()}")
    if version is not None:
        lines.append(f"DocPilot {version[0] or '(unrecorded)'} → {version[1] or '(unrecorded)'}")
    if stale is not None:
        lines.append(stale)
    return {"changed": changed, "settings": [change.model_dump() for change in settings],
            "pages": None if pages is None else pages.model_dump(), "model": model, "version": version,
            "stale_gold": [before.stale_gold, after.stale_gold] if stale is not None else None, "lines": lines}


def stale_change(before: IndexedRun | None, after: IndexedRun) -> str | None:
    """The stale mark: a line when more of ``after``'s records have stale gold than ``before``'s; else None."""
    now, earlier = after.stale_gold, before.stale_gold if before is not None else {}
    if not any(now.get(state, 0) > earlier.get(state, 0) for state in now):
        return None
    counts = ", ".join(f"{state} {count}" for state, count in sorted(now.items()))
    since = "" if before is None else f" (up from {sum(earlier.values())} the run before)"
    return (f"gold went stale: {sum(now.values())} record(s) ({counts}){since} are scored against gold the docs "
            "moved, changed or removed since the golden set was locked; their misses are the docs', not the "
            "assistant's (`docpilot golden check` names them)")


def move_text(move: Any) -> str:
    """A move as ``docpilot status`` words it: `recall@8 +0.125 ↑ better`, `latency_p50 −40 ms ↓ better`."""
    from docpilot.reports.scorecard import format_value

    if move.delta is None or move.direction in (None, "same"):
        return f"{move.metric} = same"
    sign, arrow = ("+", "↑") if move.direction == "up" else ("−", "↓")
    return f"{move.metric} {sign}{format_value(move.metric, abs(move.delta))} {arrow} {move.change or ''}".rstrip()


def _step(index: RunIndex, run: IndexedRun, previous: IndexedRun | None, metrics: list[str]) -> Step:
    if previous is None:
        first = {m: {"value": run.summary.get(m), "previous": None, "delta": None, "direction": None,
                     "change": None, "text": ""} for m in metrics}
        return Step(run=run, previous=None, moves=first, cause=None)
    pair = index.cached("pairs", run.file, previous.file)
    if pair is None:
        pair = compare_neighbours(previous, run)
        index.store("pairs", run.file, previous.file, pair)
    moves = {m: pair["moves"].get(m) or {"value": None, "previous": None, "delta": None, "direction": None,
                                          "change": None, "text": ""} for m in metrics}
    moved = any(_is_move(move) for move in moves.values())
    return Step(run=run, previous=previous, moves=moves, cause=pair["cause"] if moved else None)


def _is_move(move: MoveData) -> bool:
    return move.get("change") in ("better", "worse") or (move.get("change") is None
                                                         and move.get("direction") in ("up", "down"))
