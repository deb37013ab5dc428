"""Drift: a slide no single night shows, found by pairing the latest run with the run N runs back.

Each night's change may stay under its noise floor while the nights add up. Drift
compares the latest run of a series with the run ``back`` runs before it, record by
record, with the paired tests of ``docpilot improve compare`` (exact McNemar for
0/1 outcomes, Wilcoxon signed-rank for continuous ones): the comparison sees which
records changed, so a slow slide that moved several records the same way is found
even where no summary value moved past its floor on any one night.

The tests of two given reports never change, so they are kept in the run index
(``drifts``) once worked out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docpilot.errors import DocpilotError
from docpilot.history.index import RunIndex
from docpilot.history.run import IndexedRun

DEFAULT_BACK = 7
"""How many runs back the latest run is compared with: a week of nightly runs."""


@dataclass
class Drift:
    """The latest run of a series paired with an earlier one."""

    latest: IndexedRun
    """The latest run."""
    base: IndexedRun | None
    """The run ``back`` runs before it; None when the series is too short."""
    back: int
    """How many runs back ``base`` is."""
    tests: list[dict[str, Any]] = field(default_factory=list)
    """The paired tests (``docpilot.reports.compare.PairedTest`` fields, without the flipped records)."""
    note: str | None = None
    """Why there was nothing to test."""

    @property
    def worse(self) -> list[str]:
        """The outcomes significantly worse in the latest run."""
        return [test["outcome"] for test in self.tests if test["direction"] == "worse"]

    @property
    def better(self) -> list[str]:
        """The outcomes significantly better in the latest run."""
        return [test["outcome"] for test in self.tests if test["direction"] == "better"]

    def warning(self) -> str | None:
        """One line when some outcome slid significantly; None when none did."""
        if not self.worse or self.base is None:
            return None
        slid = ", ".join(f"{t['outcome']} {t['mean_a']:.3f} → {t['mean_b']:.3f} (p {t['p_shown']})"
                         for t in self.tests if t["direction"] == "worse")
        return (f"drift: run {self.latest.run_id} is worse than run {self.base.run_id}, {self.back} runs back: "
                f"{slid}; see `docpilot history`")

    def describe(self) -> dict[str, object]:
        """The drift check as plain JSON-ready data."""
        return {
            "latest": self.latest.run_id, "base": None if self.base is None else self.base.run_id, "back": self.back,
            "flagged": bool(self.worse), "worse": self.worse, "better": self.better, "note": self.note,
            "tests": self.tests,
        }


def find_drift(index: RunIndex, latest: IndexedRun, *, back: int = DEFAULT_BACK) -> Drift:
    """Pair ``latest`` with the run ``back`` runs before it in its series and test every outcome."""
    if back < 1:
        raise ValueError(f"back must be at least 1, not {back}")
    runs = index.series(latest.series)
    position = next((i for i, run in enumerate(runs) if run.file == latest.file), len(runs) - 1)
    if position < back:
        return Drift(latest=latest, base=None, back=back,
                     note=f"not checked: the series holds {position + 1} run(s) up to {latest.run_id}, "
                          f"and drift looks {back} runs back")
    base = runs[position - back]
    stored = index.cached("drifts", latest.file, base.file)
    if stored is None:
        stored = _paired_tests(index.root, base, latest)
        if stored.get("note") is None:
            index.store("drifts", latest.file, base.file, stored)
    return Drift(latest=latest, base=base, back=back, tests=stored["tests"], note=stored.get("note"))


def drift_of_file(folder: str | Path, file_name: str, *, back: int = DEFAULT_BACK) -> Drift | None:
    """The drift check of the run in ``folder/file_name``; None when the index cannot say (the run is not in it).

    For ``docpilot status``, which has already warned about unreadable reports, so the
    index's own list of them is not repeated here.
    """
    import sqlite3

    index = RunIndex(folder)
    try:
        index.refresh()
        latest = next((run for run in reversed(index.runs()) if run.file == file_name), None)
        return None if latest is None else find_drift(index, latest, back=back)
    except (sqlite3.Error, OSError):
        return None  # the drift line is a bonus; the status itself stands without it


def _paired_tests(root: Path, base: IndexedRun, latest: IndexedRun) -> dict[str, Any]:
    from docpilot.reports.compare import compare_reports, describe_p
    from docpilot.reports.report import load_report

    try:
        comparison = compare_reports(load_report(root / base.file), load_report(root / latest.file))
    except DocpilotError as exc:
        return {"tests": [], "note": f"not checked: {exc}"}
    tests = [{**test.model_dump(exclude={"better", "worse"}), "p_shown": describe_p(test.p_value)}
             for test in comparison.tests]
    return {"tests": tests, "note": None}

