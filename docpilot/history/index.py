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

The index may come from elsewhere with the reports (a CI cache of the report folder), so
what it holds is data, and only data of the kinds DocPilot writes is read: every column
is plain SQLite text or integer, the JSON ones are parsed as JSON, and ``refresh`` first
checks each row's types in SQL (``_UNSOUND``). A row that fails is dropped with one note
and indexed again from its report; a stored comparison that fails is dropped and worked
out again.

Two runs may finish at once: SQLite runs in WAL mode with a busy timeout, every write
is one ``BEGIN IMMEDIATE`` transaction, and a write is an upsert keyed by file name,
so two processes indexing the same report agree. Reports are parsed outside the
transaction, so a writer holds the lock only for the inserts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpilot.history.run import COLUMNS, RUN_FIELDS, IndexedRun, row_of, run_of

if TYPE_CHECKING:  # the reports' model is loaded only when a report is read: a reader of the index needs none
    from docpilot.schema import Report

INDEX_FILE = ".runs.sqlite"
"""The index's name in the report folder (a dot file, so the store's listing of reports passes over it)."""

SCHEMA_VERSION = 3
"""Version of the index's tables; an index of another version is rebuilt."""

COMPARISONS = ("pairs", "drifts")
"""The tables of worked-out comparisons between two runs: each run beside the one before it, and drift checks."""

# The comparisons stored are only as current as the code that worked them out, so the
# index keeps a hash of that code's source and forgets them when it changes.
_LOGIC = ("reports/moves.py", "reports/changes.py", "reports/compare.py", "reports/stats.py",
          "reports/scorecard.py", "history/timeline.py", "history/drift.py", "history/index.py")

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another one to finish its transaction."""

_TABLE = """CREATE TABLE IF NOT EXISTS runs (
    file TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, problem TEXT,
    run_id TEXT, created_at TEXT, series TEXT, golden TEXT, selection TEXT, record_set TEXT, split TEXT,
    gate_only INTEGER, runtime TEXT, corpus TEXT, config_digest TEXT, model_digest TEXT, code_digest TEXT,
    variant TEXT, version TEXT, model TEXT, records INTEGER, verdict TEXT,
    summary TEXT, counts TEXT, config TEXT, pages TEXT, side_files TEXT, headline TEXT, shown TEXT,
    stale_gold TEXT)"""
_SERIES_INDEX = "CREATE INDEX IF NOT EXISTS runs_by_series ON runs (series, created_at)"
_OTHER_TABLES = (
    *(f"CREATE TABLE IF NOT EXISTS {name} (file TEXT NOT NULL, other TEXT NOT NULL, payload TEXT NOT NULL, "
      "PRIMARY KEY (file, other))" for name in COMPARISONS),
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
)


def _json_of(column: str, kind: str, check: str = "1") -> str:
    """SQL true when ``column`` is text holding JSON of ``kind`` (``object``, ``array``) for which ``check`` holds.

    CASE, not AND: SQLite's JSON functions fail on text that is not JSON, so they run only on valid JSON;
    a path the JSON lacks makes NULL, read as false.
    """
    return (f"coalesce(CASE WHEN typeof({column}) = 'text' AND json_valid({column}) THEN "
            f"json_type({column}) = '{kind}' AND {check} ELSE 0 END, 0)")


def _all_of(column: str, types: str, path: str = "$") -> str:
    """SQL true when every value of the JSON object or array at ``path`` in ``column`` is of the JSON ``types``."""
    return f"NOT EXISTS (SELECT 1 FROM json_each({column}, '{path}') WHERE type NOT IN ({types}))"


_TEXT = ("run_id", "created_at", "series", "selection", "record_set", "split", "runtime", "model")
_TEXT_OR_NULL = ("golden", "corpus", "config_digest", "model_digest", "code_digest", "variant", "version")
_SOUND_RUN = " AND ".join([
    *(f"typeof({c}) = 'text'" for c in _TEXT),
    *(f"typeof({c}) IN ('text', 'null')" for c in _TEXT_OR_NULL),
    "typeof(gate_only) = 'integer' AND gate_only IN (0, 1)", "typeof(records) = 'integer'",
    "typeof(verdict) = 'text' AND verdict IN ('pass', 'fail')",
    _json_of("summary", "object", _all_of("summary", "'integer', 'real', 'null'")),
    _json_of("counts", "object", _all_of("counts", "'integer'")),
    _json_of("shown", "object", _all_of("shown", "'text'")),
    _json_of("stale_gold", "object", _all_of("stale_gold", "'integer'")),
    _json_of("pages", "object", _all_of("pages", "'text'")),
    _json_of("side_files", "object", _all_of("side_files", "'text', 'null'")),
    _json_of("config", "object"), _json_of("headline", "array", _all_of("headline", "'text'")),
])
_UNSOUND = (f"SELECT file FROM runs WHERE typeof(file) != 'text' OR (problem IS NULL AND NOT ({_SOUND_RUN})) "
            "OR (problem IS NOT NULL AND typeof(problem) != 'text')")
"""The runs whose row holds what ``row_of`` and ``_problem`` never write: a reader would trip over it."""
# What ``timeline.compare_neighbours`` and ``drift._paired_tests`` store, as far as their readers rely on it.
_SOUND_PAYLOAD = {
    "pairs": _json_of("payload", "object", "json_type(payload, '$.moves') = 'object' AND json_type(payload, "
                      "'$.cause') = 'object' AND " + _all_of("payload", "'object'", "$.moves")),
    "drifts": _json_of("payload", "object", "json_type(payload, '$.tests') = 'array' AND "
                       "coalesce(json_type(payload, '$.note'), 'null') IN ('text', 'null') AND "
                       + _all_of("payload", "'object'", "$.tests")),
}


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
        self._drop_unsound()
        listing = self._listing()
        with self._connection() as db:
            known = {file: (size, mtime) for file, size, mtime in db.execute("SELECT file, size, mtime_ns FROM runs")}
            logic = db.execute("SELECT value FROM meta WHERE key = 'logic'").fetchone()
        fresh = [(name, signature) for name, signature in listing.items() if known.get(name) != signature]
        gone = [name for name in known if name not in listing]
        if logic is None or logic[0] != _logic_digest():
            with self.writing() as db:
                for table in COMPARISONS:
                    db.execute(f"DELETE FROM {table}")
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('logic', ?)", (_logic_digest(),))
        if fresh or gone:
            parsed = [_entry_of(self.root / name, signature) for name, signature in sorted(fresh)]
            touched = [(name,) for name in gone] + [(name,) for name, _ in fresh]
            with self.writing() as db:
                db.executemany("DELETE FROM runs WHERE file = ?", [(name,) for name in gone])
                for table in COMPARISONS:
                    db.executemany(f"DELETE FROM {table} WHERE file = ?1 OR other = ?1", touched)
                db.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) "
                               f"VALUES ({', '.join('?' * len(COLUMNS))})", parsed)
        with self._connection() as db:
            return [f"skipped: {problem}"
                    for file, problem in db.execute("SELECT file, problem FROM runs WHERE problem IS NOT NULL "
                                                    "ORDER BY file")]

    def _drop_unsound(self) -> None:
        """Forget the rows and comparisons of kinds DocPilot never writes, so their reports are indexed afresh."""
        with self._connection() as db:
            unsound = [file for (file,) in db.execute(_UNSOUND)]
            comparisons = sum(db.execute(f"SELECT COUNT(*) FROM {table} WHERE NOT ({sound})").fetchone()[0]
                              for table, sound in _SOUND_PAYLOAD.items())
        if not unsound and not comparisons:
            return
        with self.writing() as db:
            db.executemany("DELETE FROM runs WHERE file = ?", [(file,) for file in unsound])
            for table, sound in _SOUND_PAYLOAD.items():
                db.execute(f"DELETE FROM {table} WHERE NOT ({sound})")
        self.notes.append(f"{self.path}: the run index held {len(unsound)} run(s) and {comparisons} comparison(s) "
                          "of a kind DocPilot never writes (was it restored from elsewhere?); they were dropped "
                          "and indexed again from the reports")

    def record(self, path: str | Path, report: Report) -> None:
        """Index one report just written to ``path`` in this folder, without reading it back."""
        path = Path(path)
        stat = path.stat()
        row = row_of(path.name, (stat.st_size, stat.st_mtime_ns), report)
        with self.writing() as db:
            for table in COMPARISONS:
                db.execute(f"DELETE FROM {table} WHERE file = ?1 OR other = ?1", (path.name,))
            db.execute(f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) "
                       f"VALUES ({', '.join('?' * len(COLUMNS))})", row)

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

    def count(self) -> int:
        """How many readable runs the index holds."""
        with self._connection() as db:
            return db.execute("SELECT COUNT(*) FROM runs WHERE problem IS NULL").fetchone()[0]

    def cached(self, table: str, file: str, other: str) -> dict[str, Any] | None:
        """A comparison stored in ``table`` (one of ``COMPARISONS``) for the runs in ``file`` and ``other``."""
        with self._connection() as db:
            found = db.execute(f"SELECT payload FROM {table} WHERE file = ? AND other = ?", (file, other)).fetchone()
        return None if found is None else json.loads(found[0])

    def store(self, table: str, file: str, other: str, payload: dict[str, Any]) -> None:
        """Keep a comparison of the runs in ``file`` and ``other``; it is forgotten when either report changes."""
        try:
            with self.writing() as db:
                db.execute(f"INSERT OR REPLACE INTO {table} (file, other, payload) VALUES (?, ?, ?)",
                           (file, other, json.dumps(payload)))
        except sqlite3.Error:
            pass  # a comparison not kept is worked out again next time

    def _select(self, where: str, values: tuple[object, ...]) -> list[IndexedRun]:
        with self._connection() as db:
            rows = db.execute(f"SELECT file, {RUN_FIELDS} FROM runs {where}", values).fetchall()
        return [run_of(row) for row in rows]

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
    def writing(self) -> Iterator[sqlite3.Connection]:
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
        for table in ("runs", *COMPARISONS, "meta"):
            if replace:
                db.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in (_TABLE, _SERIES_INDEX, *_OTHER_TABLES):
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.commit()


def _memory_index() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    for statement in (_TABLE, _SERIES_INDEX, *_OTHER_TABLES):
        db.execute(statement)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return db


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite found a file that is not (or no longer) a database, as opposed to one it may not write."""
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _entry_of(path: Path, signature: tuple[int, int]) -> tuple[object, ...]:
    """The index row of one report file: the run's fields, or the reason it is skipped.

    The report is parsed and validated in one pass (``model_validate_json``), which
    halves the time a rebuild of a thousand reports takes against parsing then validating.
    """
    from pydantic import ValidationError

    from docpilot.errors import InputError, ReportError
    from docpilot.reports.report import check_consistency
    from docpilot.schema import Report
    from docpilot.userfiles.intake import REPORT_FILE, read_text

    try:
        report = Report.model_validate_json(read_text(path, REPORT_FILE))
    except InputError as exc:
        return _problem(path.name, signature, str(exc))
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            return _problem(path.name, signature,
                            f"{path}: not valid JSON ({first['msg']}); is this a DocPilot report?")
        where = ".".join(str(p) for p in first["loc"])
        return _problem(path.name, signature, f"{path}: not a DocPilot report: {where}: {first['msg']} "
                                              f"({exc.error_count()} problem(s))")
    except (OSError, ValueError, RecursionError) as exc:
        return _problem(path.name, signature, f"{path}: cannot be read ({exc})")
    try:
        check_consistency(report, path)  # rows no run could have left: a hand edit
    except ReportError as exc:
        return _problem(path.name, signature, str(exc))
    return row_of(path.name, signature, report)


def _problem(name: str, signature: tuple[int, int], reason: str) -> tuple[object, ...]:
    reason = reason.strip().replace("\n  fix: ", "; fix: ")
    return (name, *signature, reason, *([None] * (len(COLUMNS) - 4)))


@functools.cache
def _logic_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for name in _LOGIC:
        digest.update(name.encode())
        digest.update((root / name).read_bytes())
    return digest.hexdigest()


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
