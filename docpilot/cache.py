"""A per-record, per-stage result cache on disk.

Each entry's key hashes exactly what the stage's result depends on, the code the stage
runs included, prefixed by the stage name and the layout's version:
``model:4:<sha256 of messages, provider, model, params, code digest>``.
The store is diskcache (SQLite underneath), so entries written before a crash are
there on the next run, and several processes may share one cache directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import orjson

from docpilot.errors import DocpilotError, InputError, StorageError, fills_disk

# The layout of each stage's key and entry: a version changes only when the parts a key is
# made of, or the shape of what is stored, change (the entries under older keys are then
# never read again; ``docpilot cache clear`` drops them). A change of the code a stage runs
# needs no new version: every key holds a digest of that code (``docpilot.codebase``).
STAGE_VERSIONS = {"retrieve": "3", "model": "4"}

_KEY_JSON = orjson.OPT_SORT_KEYS
_STORE_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")
_VALUE_FOLDER = re.compile(r"^[0-9a-f]{2}$")  # where diskcache keeps large values


class CacheUnreadable(InputError):
    """The stage cache's database is corrupt: SQLite says so, or its own check finds damage; clearing it is the fix."""

    def __init__(self, directory: Path, exc: BaseException) -> None:
        super().__init__(
            f"the stage cache cannot be read ({type(exc).__name__}: {str(exc).strip() or 'no detail'})",
            path=directory / "cache.db",
            hint="run `docpilot cache clear` (it removes the cache's files and keeps the search index), "
            "or pass --no-cache to run without it",
        )


class CacheUnavailable(InputError):
    """The stage cache failed for a reason other than damage (locked, read-only); its file is sound, so keep it."""

    def __init__(self, directory: Path, exc: BaseException) -> None:
        name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        super().__init__(
            f"the stage cache could not be used ({name}: {str(exc).strip() or 'no detail'}); "
            "its file checks as sound and was left as it is",
            path=directory / "cache.db",
            # SQLite's extended codes refine a primary one: SQLITE_BUSY_RECOVERY is a kind of SQLITE_BUSY.
            hint=_UNAVAILABLE_HINTS.get(name.removeprefix("SQLITE_").split("_")[0], _UNAVAILABLE_HINT),
        )


_UNAVAILABLE_HINT = "run again; if it persists, pass --no-cache to run without the cache"
_UNAVAILABLE_HINTS = {
    "BUSY": "another process holds the cache; wait for it, or point DOCPILOT_CACHE_DIR elsewhere",
    "LOCKED": "another process holds the cache; wait for it, or point DOCPILOT_CACHE_DIR elsewhere",
    "READONLY": "the cache folder is read-only; make it writable, or point DOCPILOT_CACHE_DIR elsewhere",
    "CANTOPEN": "the cache folder cannot be opened; check its permissions, or point DOCPILOT_CACHE_DIR elsewhere",
    "PERM": "permission denied; check the cache folder's permissions, or point DOCPILOT_CACHE_DIR elsewhere",
}
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


@contextlib.contextmanager
def _unreadable(directory: Path) -> Iterator[None]:
    """Turn the store's own failures into an error that says which they are, so that only damage is cleared.

    A full disk or a file-size limit (SQLite's full-disk and write errors, or an OSError
    writing a large value's file) is a StorageError: the write was rolled back and the
    cache is as it was. SQLite's corrupt and not-a-database errors, and a value that does
    not decode, are ``CacheUnreadable``. Any other database error is checked with
    ``PRAGMA quick_check`` on a connection of its own: damage found is
    ``CacheUnreadable``, a sound file ``CacheUnavailable``.
    """
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise _database_failure(directory, exc) from None
    except OSError as exc:
        if not fills_disk(exc):
            raise
        # diskcache keeps a large value in a file of its own, written before the row that names it.
        raise StorageError("stage cache", exc.filename or directory, exc, kept=_KEPT) from None
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise CacheUnreadable(directory, exc) from None


_KEPT = "the cache was left as it was and is not damaged, so there is no need to clear it"


def _database_failure(directory: Path, exc: sqlite3.DatabaseError) -> DocpilotError:
    """The error a database failure of the store is: a full disk, damage, or neither."""
    if fills_disk(exc):
        return StorageError("stage cache", directory / "cache.db", exc, kept=_KEPT)
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(_DAMAGED) or not _sound(directory / "cache.db"):
        return CacheUnreadable(directory, exc)
    return CacheUnavailable(directory, exc)


def _sound(database: Path) -> bool:
    """Whether SQLite's own check finds the database file whole, read on a connection apart from the store's."""
    if not database.is_file():
        return True  # nothing there to be damaged
    try:
        with contextlib.closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            return db.execute("PRAGMA quick_check").fetchone() == ("ok",)
    except sqlite3.DatabaseError as exc:
        name = getattr(exc, "sqlite_errorname", "") or ""
        return not name.startswith(_DAMAGED)  # a check that cannot run (locked) found no damage


def cache_key(stage: str, *parts: Any) -> str:
    """The key of one stage result: stage, stage version and a hash of its inputs.

    The inputs are written as JSON with sorted keys (orjson: a primed prompt of a few
    kilobytes takes a few microseconds, where the standard library takes forty), so equal
    inputs give equal keys whatever the order their dicts were built in.
    """
    digest = hashlib.sha256(orjson.dumps(parts, option=_KEY_JSON, default=str)).hexdigest()
    return f"{stage}:{STAGE_VERSIONS[stage]}:{digest}"


_FORSAKEN: list[diskcache.Cache] = []
"""Stores a forked child inherited and replaced: kept so that they are never closed there."""


class StageCache:
    """Stage results on disk, keyed by ``cache_key``; values are JSON-ready dicts."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # No culling on every write (diskcache checks the size limit on each set by default):
        # the limit is far above any eval, and the check costs a query per stored turn.
        with _unreadable(self.directory):
            self._opened = diskcache.Cache(str(self.directory), size_limit=2**34, cull_limit=0)
        self._pid = os.getpid()

    @property
    def _store(self) -> diskcache.Cache:
        """The store, opened again in a forked child (``run.forks``) the first time the child uses it.

        SQLite's connections must not cross a fork: the parent goes on using its own. The
        inherited one is kept, unused and unclosed (closing it could disturb the parent's
        locks on the same files).
        """
        if self._pid != os.getpid():
            _FORSAKEN.append(self._opened)
            with _unreadable(self.directory):
                self._opened = diskcache.Cache(str(self.directory), size_limit=2**34, cull_limit=0)
            self._pid = os.getpid()
        return self._opened

    # Values are stored as JSON bytes, which diskcache keeps as they are: reading one back
    # costs a fraction of unpickling it, and a re-run reads one per record and stage.

    def get(self, key: str) -> dict | None:
        with _unreadable(self.directory):
            value = self._store.get(key)
            return None if value is None else orjson.loads(value)

    def set(self, key: str, value: dict) -> None:
        with _unreadable(self.directory):
            self._store.set(key, orjson.dumps(value))

    def set_many(self, items: list[tuple[str, dict]]) -> None:
        """Store several entries in one transaction: all of them or, after a crash, none."""
        with _unreadable(self.directory), self._store.transact():
            for key, value in items:
                self._store.set(key, orjson.dumps(value))

    def close(self) -> None:
        self._store.close()

    def __getstate__(self) -> dict:
        return {"directory": self.directory}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"])


def describe_cache(directory: str | Path) -> dict:
    """Entries per stage and bytes on disk of a cache directory (an absent one is empty)."""
    directory = Path(directory)
    entries = {stage: 0 for stage in STAGE_VERSIONS}
    if not directory.exists():
        return {"directory": str(directory), "entries": entries, "bytes": 0}
    cache = StageCache(directory)
    try:
        with _unreadable(directory):
            for key in cache._store.iterkeys():
                stage = str(key).split(":", 1)[0]
                entries[stage] = entries.get(stage, 0) + 1
            size = cache._store.volume()
    finally:
        cache.close()
    return {"directory": str(directory), "entries": entries, "bytes": size}


def clear_cache(directory: str | Path, *, stage: str | None = None) -> int:
    """Remove every cached result, or one stage's; returns how many were removed.

    A cache too damaged to open is cleared all the same, by removing its files (the
    search index beside it stays); the count is then 0, as nothing could be counted.
    """
    directory = Path(directory)
    if not directory.exists():
        return 0
    try:
        cache = StageCache(directory)
    except CacheUnreadable:
        _remove_store(directory)
        return 0
    try:
        with _unreadable(directory):
            if stage is None:
                return cache._store.clear()
            doomed = [k for k in cache._store.iterkeys() if str(k).startswith(f"{stage}:")]
            for key in doomed:
                cache._store.delete(key)
            return len(doomed)
    except CacheUnreadable:
        cache.close()
        _remove_store(directory)
        return 0
    finally:
        cache.close()


def _remove_store(directory: Path) -> None:
    """Delete the cache's database and value files, and nothing else in the folder."""
    for name in _STORE_FILES:
        (directory / name).unlink(missing_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink() and _VALUE_FOLDER.match(entry.name):
            shutil.rmtree(entry)
