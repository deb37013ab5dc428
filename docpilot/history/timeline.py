"""A metric across the comparable runs: its values, the runs where it moved, and what changed at each.

A *series* is the runs that share the golden set, record set, split, selection, mode
and runtime (``docpilot.reports.store.COMPARABLE_FIELDS``): only their numbers can be
set side by side. Each run is compared with the run before it in its series exactly
as ``docpilot status`` compares the last two (``docpilot.reports.moves``): a change
below the metric's noise floor is no move. At a run where some metric moved, the
cause is what differs between the two runs, in the words of ``docpilot improve
compare``: which fingerprints changed, each setting old → new, the pages of the
docs, the model, and the DocPilot version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from docpilot.errors import InputError, ReportError
from docpilot.history.index import IndexedRun, RunIndex
from docpilot.reports.changes import PageChanges, SettingChange, page_changes, setting_changes
from docpilot.reports.moves import Move, metric_moves
from docpilot.reports.scorecard import headline_metrics

DEFAULT_LAST = 30
"""Runs shown when ``--last`` is not given."""


@dataclass(frozen=True)
class Cause:
    """What differs between a run and the one before it in its series."""

    changed: tuple[str, ...]
    """Fingerprints that differ: corpus, model, config, code (``improve compare``'s list)."""
    settings: tuple[SettingChange, ...] = ()
    """Each configuration key that differs, old → new."""
    pages: PageChanges | None = None
    """The pages and side files that differ; None when the corpus is the same."""
    model: tuple[str, str] | None = None
    """The model before and after, when it differs."""
    version: tuple[str | None, str | None] | None = None
    """The DocPilot version before and after, when it differs."""

    def lines(self) -> list[str]:
        """The cause as ``improve compare`` prints it, one line each."""
        found = [f"changed between the runs: {', '.join(self.changed) or 'nothing'}"]
        if self.model is not None:
            found.append(f"model {self.model[0]} → {self.model[1]}")
        found += [f"setting {change.describe()}" for change in self.settings]
        if self.pages is not None:
            found.append(f"docs: {self.pages.describe()}")
        if self.version is not None:
            found.append(f"DocPilot {self.version[0] or '(unrecorded)'} → {self.version[1] or '(unrecorded)'}")
        return found

    def describe(self) -> dict[str, object]:
        """The cause as plain JSON-ready data."""
        return {
            "changed": list(self.changed),
            "settings": [change.model_dump() for change in self.settings],
            "pages": None if self.pages is None else self.pages.model_dump(),
            "model": None if self.model is None else list(self.model),
            "version": None if self.version is None else list(self.version),
            "lines": self.lines(),
        }


@dataclass(frozen=True)
class Step:
    """One run of the series, with each chosen metric's move since the run before it."""

    run: IndexedRun
    """The run."""
    previous: IndexedRun | None
    """The run before it in the series; None for the series' first run."""
    moves: dict[str, Move]
    """Metric id → its move since ``previous`` (``change`` None when there is no previous run)."""
    cause: Cause | None
    """What differs from ``previous``; None when nothing moved beyond its floor, or there is no previous run."""

    @property
    def moved(self) -> list[Move]:
        """The moves beyond the noise floor, in metric order."""
        return [move for move in self.moves.values() if move.change in ("better", "worse")
                or (move.change is None and move.direction in ("up", "down"))]


@dataclass
class Timeline:
    """The shown runs of one series and the chosen metrics across them."""

    metrics: list[str]
    """The metric ids shown, in order."""
    steps: list[Step]
    """The shown runs, oldest first."""
    series_runs: int
    """How many runs the whole series holds (``steps`` may show fewer)."""
    latest: IndexedRun
    """The run the series was chosen by."""
    notes: list[str] = field(default_factory=list)
    """What a reader should know: runs of other series left out, a window that is empty."""

    def values(self, metric: str) -> list[float | int | None]:
        """The metric's value at each shown run, oldest first."""
        return [step.moves[metric].value for step in self.steps]

    def describe(self) -> dict[str, object]:
        """The timeline as plain JSON-ready data: each run's values, and each move with its cause."""
        return {
            "series": {"golden": self.latest.golden, "set": self.latest.record_set, "split": self.latest.split,
                       "selection": self.latest.selection, "gate_only": self.latest.gate_only,
                       "runtime": self.latest.runtime, "runs": self.series_runs},
            "metrics": self.metrics,
            "runs": [{**step.run.describe(), "values": {m: step.moves[m].value for m in self.metrics}}
                     for step in self.steps],
            "moves": [{"run_id": step.run.run_id, "created_at": step.run.created_at,
                       "previous": step.previous.run_id if step.previous else None,
                       "metrics": {m.metric: m.model_dump(exclude={"metric"}) for m in step.moved},
                       "cause": step.cause.describe() if step.cause else None}
                      for step in self.steps if step.moved],
            "notes": self.notes,
        }


def move_text(move: Move) -> str:
    """A move as ``docpilot status`` words it: `recall@8 +0.125 ↑ better`, `latency_p50 −40 ms ↓ better`."""
    from docpilot.reports.scorecard import format_value

    if move.delta is None or move.direction in (None, "same"):
        return f"{move.metric} = same"
    sign, arrow = ("+", "↑") if move.direction == "up" else ("−", "↓")
    return f"{move.metric} {sign}{format_value(move.metric, abs(move.delta))} {arrow} {move.change or ''}".rstrip()


def latest_run(index: RunIndex) -> IndexedRun:
    """The newest run of the index; ReportError when the folder holds no readable report."""
    latest = index.latest()
    if latest is None:
        raise ReportError(f"{index.root}: no readable report; run `docpilot eval` first, or pass --reports DIR")
    return latest


def choose_metrics(latest: IndexedRun, asked: tuple[str, ...] | list[str]) -> list[str]:
    """The metrics to show: those asked for, each checked against the run's summary, or its headline metrics."""
    if not asked:
        return headline_metrics(latest)  # type: ignore[arg-type]  # reads gate_only, set and summary only
    unknown = [metric for metric in asked if metric not in latest.summary]
    if unknown:
        valid = ", ".join(latest.summary)
        raise InputError(f"metric {unknown[0]!r} is not in the summary of run {latest.run_id}",
                         hint=f"name one of: {valid}")
    return list(dict.fromkeys(asked))


def build_timeline(index: RunIndex, metrics: list[str], *, last: int | None = DEFAULT_LAST,
                   since: str | None = None, latest: IndexedRun | None = None) -> Timeline:
    """The series of ``latest`` (default: the index's newest run) up to it, cut to the runs since ``since`` and the ``last`` N."""
    latest = latest or latest_run(index)
    runs = index.series(latest.series)
    notes = []
    others = len(index.runs()) - len(runs)
    # A run that is not the newest sees its series as it stood that night.
    position = next((i for i, run in enumerate(runs) if run.file == latest.file), len(runs) - 1)
    runs = runs[: position + 1]
    if others:
        notes.append(f"{others} run(s) of other series left out: a different golden set, record set, split, "
                     "selection, mode or runtime starts a new series")
    start = 0
    if since is not None:
        start = next((i for i, run in enumerate(runs) if run.created_at >= since), len(runs))
    if last is not None:
        start = max(start, len(runs) - last)
    steps = [_step(run, runs[i - 1] if i > 0 else None, metrics) for i, run in enumerate(runs) if i >= start]
    if not steps:
        notes.append(f"no run of the series was made at or after {since}")
    return Timeline(metrics=metrics, steps=steps, series_runs=len(runs), latest=latest, notes=notes)


def describe_cause(before: IndexedRun, after: IndexedRun) -> Cause:
    """What differs between two runs of a series."""
    fingerprints_a, fingerprints_b = before.fingerprints, after.fingerprints
    changed = tuple(name for name in ("corpus", "model", "config", "code")
                    if fingerprints_a.get(name) != fingerprints_b.get(name))
    settings = tuple(setting_changes(before, after)) if "config" in changed else ()  # type: ignore[arg-type]
    pages = page_changes(before, after) if "corpus" in changed else None  # type: ignore[arg-type]
    model = (before.model, after.model) if before.model != after.model else None
    version = (before.version, after.version) if before.version != after.version else None
    return Cause(changed=changed, settings=settings, pages=pages, model=model, version=version)


def _step(run: IndexedRun, previous: IndexedRun | None, metrics: list[str]) -> Step:
    moves = {move.metric: move for move in metric_moves(_Summary(run, metrics), previous)}  # type: ignore[arg-type]
    step = Step(run=run, previous=previous, moves=moves, cause=None)
    if previous is None or not step.moved:
        return step
    return Step(run=run, previous=previous, moves=moves, cause=describe_cause(previous, run))


class _Summary:
    """A run's summary cut to the chosen metrics, as ``metric_moves`` reads a report's."""

    def __init__(self, run: IndexedRun, metrics: list[str]) -> None:
        self.summary = {metric: run.summary.get(metric) for metric in metrics}
        self.counts = run.counts
