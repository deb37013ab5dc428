"""The run index: one SQLite file beside the reports that answers "which runs, with what numbers" without opening them.

The reports stay the record of every run; the index (``.runs.sqlite`` in the report
folder) is a copy of what questions over many runs need: each run's id, time,
fingerprints, summary, verdict and the settings and page fingerprints that say what
changed between two runs. It is never the only copy of anything: delete it and the
next reader rebuilds it from the reports.

Staleness is told cheaply: the index keeps each report file's name, size and
modification time, so a reader lists the folder (one ``scandir``), reads only the
files that are new or changed and forgets the ones that are gone. A file that is not
a readable report (truncated, edited by hand) is kept in the index with the reason,
so it is read once, skipped, and named in one warning by each command that meets it.

Two runs may finish at once: SQLite runs in WAL mode with a busy timeout, every write
is one ``BEGIN IMMEDIATE`` transaction, and a write is an upsert keyed by file name,
so two processes indexing the same report agree. Reports are parsed outside the
transaction, so a writer holds the lock only for the inserts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from docpilot.errors import ReportError
from docpilot.schema import Report

INDEX_FILE = ".runs.sqlite"
"""The index's name in the report folder (a dot file, so the store's listing of reports passes over it)."""

SCHEMA_VERSION = 1
"""Version of the index's tables; an index of another version is rebuilt."""

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another one to finish its transaction."""

_COLUMNS = (
    "file", "size", "mtime_ns", "problem", "run_id", "created_at", "series", "golden", "selection", "record_set",
    "split", "gate_only", "runtime", "corpus", "config_digest", "model_digest", "code_digest", "variant",
    "version", "model", "records", "verdict", "summary", "counts", "config", "pages", "side_files",
)
_TABLE = f"""CREATE TABLE IF NOT EXISTS runs (
    file TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, problem TEXT,
    run_id TEXT, created_at TEXT, series TEXT, golden TEXT, selection TEXT, record_set TEXT, split TEXT,
    gate_only INTEGER, runtime TEXT, corpus TEXT, config_digest TEXT, model_digest TEXT, code_digest TEXT,
    variant TEXT, version TEXT, model TEXT, records INTEGER, verdict TEXT,
    summary TEXT, counts TEXT, config TEXT, pages TEXT, side_files TEXT)"""
_SERIES_INDEX = "CREATE INDEX IF NOT EXISTS runs_by_series ON runs (series, created_at)"
_RUN_FIELDS = ", ".join(_COLUMNS[4:])


def series_key(golden: str | None, record_set: str, split: str, selection: Any, gate_only: bool,
               runtime: str) -> str:
    """The comparable-run key (``docpilot.reports.store.COMPARABLE_FIELDS``) as one string SQLite can match."""
    return json.dumps([golden, record_set, split, selection, gate_only, runtime])


@dataclass
class IndexedRun:
    """One run as the index holds it: enough to plot it and to say what changed since another run.

    It carries the attributes ``docpilot.reports.moves`` and ``docpilot.reports.changes``
    read from a report (``summary``, ``counts``, ``config``, ``page_fingerprints``,
    ``side_file_fingerprints``), so those compare indexed runs as they compare reports.
    """

    file: str
    """The report's file name in the folder."""
    run_id: str
    """The run's id."""
    created_at: str
    """When the run finished, ISO 8601 in UTC."""
    series: str
    """The comparable-run key: runs with equal keys form one series."""
    golden: str | None
    """The golden set's fingerprint."""
    selection: str
    """The selection, as the command line wrote it."""
    record_set: str
    """Which record set ran."""
    split: str
    """Which split ran."""
    gate_only: bool
    """Retrieval only."""
    runtime: str
    """Where the assistant ran."""
    corpus: str | None
    """The corpus fingerprint."""
    config_digest: str | None
    """The config fingerprint."""
    model_digest: str | None
    """The model settings' fingerprint."""
    code_digest: str | None
    """The code fingerprint."""
    variant: str | None
    """The variant's name in a run of several; None for a run of one."""
    version: str | None
    """The DocPilot version that wrote the report; None for reports older than the field."""
    model: str
    """`provider/name`, or `none (gate-only)`."""
    records: int
    """Rows in the report."""
    verdict: str
    """`pass` or `fail`."""
    summary: dict[str, float | int | None]
    """The report's summary."""
    counts: dict[str, int]
    """How many records each summary value is over."""
    _config: str = field(default="{}", repr=False)
    _pages: str = field(default="{}", repr=False)
    _side_files: str = field(default="{}", repr=False)

    @property
    def set(self) -> str:
        """The record set, by its report name."""
        return self.record_set

    @property
    def fingerprints(self) -> dict[str, str | None]:
        """The report's fingerprints, by their report names."""
        return {"corpus": self.corpus, "golden": self.golden, "model": self.model_digest,
                "config": self.config_digest, "code": self.code_digest}

    # Decoded only when a change is described: most neighbouring runs share their config and pages.
    @cached_property
    def config(self) -> dict[str, Any]:
        """The report's (redacted) configuration."""
        return json.loads(self._config)

    @cached_property
    def page_fingerprints(self) -> dict[str, str]:
        """Page id → fingerprint; empty for reports older than page fingerprints."""
        return json.loads(self._pages)

    @cached_property
    def side_file_fingerprints(self) -> dict[str, str | None]:
        """Side file → fingerprint; empty for reports older than them."""
        return json.loads(self._side_files)

    def describe(self) -> dict[str, object]:
        """The run's identity as plain JSON-ready data."""
        return {"run_id": self.run_id, "created_at": self.created_at, "file": self.file, "verdict": self.verdict,
                "model": self.model, "version": self.version, "variant": self.variant}


class RunIndex:
    """The index of one report folder; ``refresh`` brings it up to date with the folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / INDEX_FILE
        self.notes: list[str] = []
        """Things a reader should know about the index itself (rebuilt, kept in memory only)."""
        self._memory: sqlite3.Connection | None = None

    # Reading -------------------------------------------------------------------------

    def refresh(self) -> list[str]:
        """Index every new or changed report, forget removed ones; returns one warning per unreadable file."""
        listing = self._listing()
        with self._connection() as db:
            known = {file: (size, mtime) for file, size, mtime in db.execute("SELECT file, size, mtime_ns FROM runs")}
        fresh = [(name, signature) for name, signature in listing.items() if known.get(name) != signature]
        gone = [name for name in known if name not in listing]
        if fresh or gone:
            parsed = [_entry_of(self.root / name, signature) for name, signature in sorted(fresh)]
            with self._writing() as db:
                db.executemany("DELETE FROM runs WHERE file = ?", [(name,) for name in gone])
                db.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(_COLUMNS)}) "
                               f"VALUES ({', '.join('?' * len(_COLUMNS))})", parsed)
        with self._connection() as db:
            return [f"skipped: {problem}"
                    for file, problem in db.execute("SELECT file, problem FROM runs WHERE problem IS NOT NULL "
                                                    "ORDER BY file")]

    def record(self, path: str | Path, report: Report) -> None:
        """Index one report just written to ``path`` in this folder, without reading it back."""
        path = Path(path)
        stat = path.stat()
        row = _row_of(path.name, (stat.st_size, stat.st_mtime_ns), report)
        with self._writing() as db:
            db.execute(f"INSERT OR REPLACE INTO runs ({', '.join(_COLUMNS)}) "
                       f"VALUES ({', '.join('?' * len(_COLUMNS))})", row)

    def latest(self) -> IndexedRun | None:
        """The newest indexed run."""
        found = self._select("WHERE problem IS NULL ORDER BY created_at DESC, mtime_ns DESC, run_id DESC LIMIT 1", ())
        return found[0] if found else None

    def series(self, key: str, *, since: str | None = None) -> list[IndexedRun]:
        """The runs of one series (equal ``series_key``), oldest first, made at or after ``since`` when given."""
        if since is None:
            return self._select("WHERE problem IS NULL AND series = ? ORDER BY created_at, mtime_ns, run_id", (key,))
        return self._select("WHERE problem IS NULL AND series = ? AND created_at >= ? "
                            "ORDER BY created_at, mtime_ns, run_id", (key, since))

    def runs(self) -> list[IndexedRun]:
        """Every indexed run, oldest first."""
        return self._select("WHERE problem IS NULL ORDER BY created_at, mtime_ns, run_id", ())

    def _select(self, where: str, values: tuple[object, ...]) -> list[IndexedRun]:
        with self._connection() as db:
            rows = db.execute(f"SELECT file, {_RUN_FIELDS} FROM runs {where}", values).fetchall()
        return [_run_of(row) for row in rows]

    # The database --------------------------------------------------------------------

    def _listing(self) -> dict[str, tuple[int, int]]:
        if not self.root.is_dir():
            return {}
        found = {}
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name.endswith(".json") and not entry.name.startswith("."):
                    try:
                        if entry.is_file():
                            stat = entry.stat()
                            found[entry.name] = (stat.st_size, stat.st_mtime_ns)
                    except OSError:
                        continue  # gone between the listing and the look
        return found

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._memory is None and not self.root.is_dir():
            self._memory = _memory_index()  # no folder, no runs: nothing to keep and nowhere to keep it
        if self._memory is not None:
            yield self._memory
            return
        try:
            db = self._open()
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                self._memory = _memory_index()
                self.notes.append(f"{self.path}: the run index cannot be written ({exc}); it is kept in memory "
                                  "for this command")
                yield self._memory
                return
            self.notes.append(f"{self.path}: the run index was damaged ({exc}); rebuilt from the reports")
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            db = self._open()
        with closing(db):
            yield db

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.rollback()
                raise
            db.commit()

    def _open(self) -> sqlite3.Connection:
        if not self.root.is_dir():
            raise sqlite3.OperationalError(f"{self.root} is not a folder")
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                _create(db, replace=version != 0)
        except BaseException:
            db.close()
            raise
        return db


def _create(db: sqlite3.Connection, *, replace: bool) -> None:
    db.execute("BEGIN IMMEDIATE")
    if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:  # another process may have been first
        if replace:
            db.execute("DROP TABLE IF EXISTS runs")
        db.execute(_TABLE)
        db.execute(_SERIES_INDEX)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.commit()


def _memory_index() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.execute(_TABLE)
    db.execute(_SERIES_INDEX)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return db


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite found a file that is not (or no longer) a database, as opposed to one it may not write."""
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _entry_of(path: Path, signature: tuple[int, int]) -> tuple[object, ...]:
    """The index row of one report file: the run's fields, or the reason it is skipped."""
    from docpilot.reports.report import load_report

    try:
        report = load_report(path)
    except ReportError as exc:
        return _problem(path.name, signature, str(exc))
    except (OSError, ValueError) as exc:
        return _problem(path.name, signature, f"{path}: cannot be read ({exc})")
    return _row_of(path.name, signature, report)


def _problem(name: str, signature: tuple[int, int], reason: str) -> tuple[object, ...]:
    reason = reason.strip().replace("\n  fix: ", "; fix: ")
    return (name, *signature, reason, *([None] * (len(_COLUMNS) - 4)))


def _row_of(name: str, signature: tuple[int, int], report: Report) -> tuple[object, ...]:
    fingerprints = report.fingerprints
    model = (report.config or {}).get("model") or {}
    model_name = "none (gate-only)" if report.gate_only else f"{model.get('provider', '?')}/{model.get('name', '?')}"
    key = series_key(fingerprints.get("golden"), report.set, report.split, report.selection.key(),
                     report.gate_only, report.runtime)
    return (
        name, *signature, None, report.run_id, report.created_at, key, fingerprints.get("golden"),
        report.selection.describe(), report.set, report.split, int(report.gate_only), report.runtime,
        fingerprints.get("corpus"), fingerprints.get("config"), fingerprints.get("model"), fingerprints.get("code"),
        getattr(report, "variant", None), getattr(report, "docpilot_version", None), model_name, len(report.rows),
        report.verdict, json.dumps(report.summary), json.dumps(report.counts), json.dumps(report.config or {}),
        json.dumps(report.page_fingerprints), json.dumps(report.side_file_fingerprints),
    )


def _run_of(row: tuple[Any, ...]) -> IndexedRun:
    (file, run_id, created_at, series, golden, selection, record_set, split, gate_only, runtime, corpus,
     config_digest, model_digest, code_digest, variant, version, model, records, verdict, summary, counts,
     config, pages, side_files) = row
    return IndexedRun(
        file=file, run_id=run_id, created_at=created_at, series=series, golden=golden, selection=selection,
        record_set=record_set, split=split, gate_only=bool(gate_only), runtime=runtime, corpus=corpus,
        config_digest=config_digest, model_digest=model_digest, code_digest=code_digest, variant=variant,
        version=version, model=model, records=records, verdict=verdict, summary=json.loads(summary),
        counts=json.loads(counts), _config=config, _pages=pages, _side_files=side_files,
    )


def record_run(path: str | Path, report: Report) -> str | None:
    """Index a report just written to ``path`` in the index of its folder; a warning when that failed, else None.

    The report is already safe on disk, so a failure here costs nothing but time: the
    next reader of the folder indexes the report from its file.
    """
    try:
        RunIndex(Path(path).parent).record(path, report)
    except (sqlite3.Error, OSError) as exc:
        return f"{Path(path).parent / INDEX_FILE}: the run was not added to the run index ({exc}); the next " \
               "`docpilot history` adds it from its report"
    return None
