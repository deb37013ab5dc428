"""The report store: every run's report, kept as ``<run_id>.json`` under ``reports_dir``.

``docpilot eval`` writes each report there; the store lists them newest first and
reads only as much as a question needs. Listing sorts file names (a run id starts
with its UTC time, so names sort by age) without opening a file; a header (run id,
time, fingerprints, set, split, mode) is read without validating the rows, and the
full report is loaded only when asked for. A file that cannot be read is skipped and
noted in ``problems``, so one damaged report does not hide the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from docpilot.errors import InputError, ReportError
from docpilot.reports.report import load_report
from docpilot.schema import Report, Selection
from docpilot.userfiles.intake import REPORT_FILE, read_text

_RUN_ID_TIME = re.compile(r"^(\d{8}T\d{6}Z)")


class StoredReport(BaseModel):
    """A report's identity and settings, read without its rows."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: Path | None = None
    """Where the report file is; None for a report that was not read from a file."""
    run_id: str
    """The run's id."""
    created_at: str
    """When the run finished, ISO 8601 in UTC."""
    fingerprints: dict[str, str]
    """Hashes of the corpus, golden set, model settings, config and code."""
    set: Literal["golden", "adversarial"] = "golden"
    """Which record set ran."""
    split: Literal["dev", "test", "all"] = "all"
    """Which split ran."""
    selection: Selection = Selection()
    """Which records of the split ran; empty for all of them (and for reports older than the field)."""
    gate_only: bool = False
    """Retrieval only: no model was called."""
    runtime: Literal["local", "server"] = "local"
    """Where the assistant ran."""
    verdict: Literal["pass", "fail"]
    """The run's verdict."""

    def load(self) -> Report:
        """The whole report, rows included."""
        if self.path is None:
            raise ReportError(f"run {self.run_id}: this report has no file to load")
        return load_report(self.path)

    def describe(self) -> dict[str, object]:
        """The header as plain JSON-ready data."""
        return {
            "run_id": self.run_id,
            "created_at": self.created_at,
            "path": None if self.path is None else str(self.path),
            "set": self.set,
            "split": self.split,
            "selection": self.selection.describe(),
            "gate_only": self.gate_only,
            "runtime": self.runtime,
            "verdict": self.verdict,
        }


def header_of(report: Report, path: str | Path | None = None) -> StoredReport:
    """The header of a loaded report."""
    data = report.model_dump(include={"run_id", "created_at", "fingerprints", "set", "split", "selection",
                                      "gate_only", "runtime", "verdict"})
    return StoredReport.model_validate({**data, "path": None if path is None else Path(path)})


COMPARABLE_FIELDS: tuple[str, ...] = ("golden", "set", "split", "selection", "gate_only", "runtime")
"""What two runs must share for their numbers to be compared: the golden set's
fingerprint, the record set, the split, the selection of records, the mode and the runtime."""


def comparison_key(report: StoredReport | Report) -> tuple[object, ...]:
    """The values of ``COMPARABLE_FIELDS`` for one run."""
    return (report.fingerprints.get("golden"), report.set, report.split, report.selection.key(),
            report.gate_only, report.runtime)


def differences(a: StoredReport | Report, b: StoredReport | Report) -> list[str]:
    """What keeps two runs from being comparable, one phrase each; empty when they are."""
    found = []
    for name, left, right in zip(COMPARABLE_FIELDS, comparison_key(a), comparison_key(b), strict=True):
        if left != right:
            if name == "golden":
                found.append("the golden set differs (fingerprints.golden)")
            elif name == "selection":
                found.append(f"selection differs ({a.selection.describe()} vs {b.selection.describe()})")
            else:
                found.append(f"{name} differs ({left} vs {right})")
    return found


class ReportStore:
    """The reports of one folder, newest first."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.problems: list[str] = []
        """Files that were skipped, each with the reason; filled as files are read."""
        self._headers: dict[Path, StoredReport | None] = {}

    def paths(self) -> list[Path]:
        """Every report file, newest first, without opening any.

        Names that start with a run id sort by its time; others by modification time;
        ties (two runs in one second) by modification time, then name.
        """
        if not self.root.is_dir():
            return []
        files = [p for p in self.root.glob("*.json") if not p.name.startswith(".") and p.is_file()]
        return sorted(files, key=_age_key, reverse=True)

    def __iter__(self) -> Iterator[StoredReport]:
        """Headers of the readable reports, newest first; unreadable files go to ``problems``."""
        for path in self.paths():
            header = self._header(path)
            if header is not None:
                yield header

    def latest(self) -> StoredReport | None:
        """The newest readable report, or None when the folder has none."""
        return next(iter(self), None)

    def previous_comparable(self, current: StoredReport) -> tuple[StoredReport | None, list[StoredReport]]:
        """The newest report older than ``current`` that it can be compared with.

        Returns that report (or None) and the older reports passed over on the way
        because they differ in a ``COMPARABLE_FIELDS`` value.
        """
        key = comparison_key(current)
        skipped: list[StoredReport] = []
        seen_current = False
        for header in self:
            if not seen_current:
                seen_current = header.path == current.path
                continue
            if comparison_key(header) == key:
                return header, skipped
            skipped.append(header)
        return None, skipped

    def find(self, run_id: str) -> StoredReport | None:
        """The report of run ``run_id``, when the store holds it."""
        path = self.root / f"{run_id}.json"
        if path.is_file():
            return self._header(path)
        return next((h for h in self if h.run_id == run_id), None)

    def _header(self, path: Path) -> StoredReport | None:
        # Each file is read once per store, so walking the list twice neither costs
        # twice nor reports a damaged file twice.
        if path not in self._headers:
            self._headers[path] = self._read_header(path)
        return self._headers[path]

    def _read_header(self, path: Path) -> StoredReport | None:
        try:
            data = json.loads(read_text(path, REPORT_FILE))  # a regular file within the report size cap
        except InputError as exc:
            self.problems.append(f"skipped: {exc}".replace("\n  fix: ", "; fix: "))
            return None
        except (OSError, json.JSONDecodeError) as exc:
            self.problems.append(f"{path}: skipped, cannot be read as JSON ({exc})")
            return None
        except RecursionError:  # any *.json may sit in the folder, nested as deeply as it likes
            self.problems.append(f"{path}: skipped, nested too deeply to be a DocPilot report")
            return None
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            self.problems.append(f"{path}: skipped, not a DocPilot report (no rows)")
            return None
        try:
            return StoredReport.model_validate({**data, "path": path})
        except RecursionError:
            self.problems.append(f"{path}: skipped, nested too deeply to be a DocPilot report")
            return None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            self.problems.append(f"{path}: skipped, not a DocPilot report ({where}: {first['msg']})")
            return None


def resolve_report(reference: str | Path, store: ReportStore) -> Path:
    """The file of a report named by a path, or by the run id of a report in ``store``.

    Raises ReportError naming both places looked in when neither holds it.
    """
    path = Path(reference)
    if path.is_file() or path.suffix == ".json" or "/" in str(reference):
        return path
    header = store.find(str(reference))
    if header is None or header.path is None:
        raise ReportError(
            f"{reference}: no such report file, and no run {reference!r} in {store.root}; "
            "pass a report path or a run id (`docpilot status` shows the latest)"
        )
    return header.path


def _age_key(path: Path) -> tuple[str, int, str]:
    try:
        mtime_ns = path.stat().st_mtime_ns
    except OSError:
        mtime_ns = 0
    match = _RUN_ID_TIME.match(path.name)
    if match is not None:
        stamp = match.group(1)
    else:
        stamp = datetime.fromtimestamp(mtime_ns / 1e9, UTC).strftime("%Y%m%dT%H%M%SZ")
    return stamp, mtime_ns, path.name
