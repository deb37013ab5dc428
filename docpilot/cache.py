"""A per-record, per-stage result cache on disk.

Each entry's key hashes exactly what the stage's result depends on, the code the stage
runs included, prefixed by the stage name and the layout's version:
``model:4:<sha256 of messages, provider, model, params, code digest>``.
The store is diskcache (SQLite underneath), so entries written before a crash are
there on the next run, and several processes may share one cache directory.

A cache folder may come from elsewhere (a CI cache another branch wrote), so what is read
back is data, never code. diskcache itself unpickles any entry whose row says pickle, and
opens any file a row names; here its reader and writer (``DataDisk``) take text keys and
bytes values only, and hand back anything else as a refusal. Every entry is parsed as the
JSON DocPilot wrote and checked against the stage's shape; one that is not (a pickle, a
value file outside the folder, bytes that do not parse) is a miss, with one warning per
cache. A database holding what diskcache never makes (another table, a trigger, a setting
diskcache does not have) is not opened at all: the run goes without the cache, and says so.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import diskcache
import orjson

from docpilot.errors import DocpilotError, InputError, StorageError, fills_disk

# The layout of each stage's key and entry: a version changes only when the parts a key is
# made of, or the shape of what is stored, change (the entries under older keys are then
# never read again; ``docpilot cache clear`` drops them). A change of the code a stage runs
# needs no new version: every key holds a digest of that code (``docpilot.codebase``).
STAGE_VERSIONS = {"retrieve": "3", "model": "4"}

T = TypeVar("T")
_KEY_JSON = orjson.OPT_SORT_KEYS
_STORE_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")
_VALUE_FOLDER = re.compile(r"^[0-9a-f]{2}$")  # where diskcache keeps large values
# A large value's file as diskcache names it (``Disk.filename``): two folder levels, then 28 hex digits.
_VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")
# Every setting is given, so a value a restored store holds for one is never applied
# (diskcache runs its ``sqlite_*`` settings as PRAGMA statements).
_SETTINGS = {**diskcache.DEFAULT_SETTINGS, "size_limit": 2**34, "cull_limit": 0}
_MODES = {diskcache.core.MODE_TEXT: "a text file entry (mode 3)", diskcache.core.MODE_PICKLE: "a pickle (mode 4)"}


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


class CacheForeign(InputError):
    """The stage cache's database holds what diskcache never makes there: it is not opened, so nothing in it runs."""

    def __init__(self, directory: Path, found: str) -> None:
        super().__init__(
            f"the stage cache holds {found}, which DocPilot's store never has; it was not opened",
            path=directory / "cache.db",
            hint="if the cache came from elsewhere (a CI cache), run `docpilot cache clear` to start it afresh "
            "(it removes the cache's files and keeps the search index)",
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
    cache is as it was. SQLite's corrupt and not-a-database errors are ``CacheUnreadable``
    (an entry that does not decode is a miss: ``StageCache.get``). Any other database error is checked with
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


@dataclass(frozen=True)
class Refusal:
    """What ``DataDisk`` hands back for a key or value of a kind DocPilot never writes: why, in a few words."""

    reason: str


class DataDisk(diskcache.Disk):
    """diskcache's reader and writer narrowed to what DocPilot stores: text keys and bytes values, no pickle.

    diskcache's own ``Disk`` unpickles a key stored as not raw and a value whose ``mode`` is
    pickle, and opens whatever file a row's ``filename`` names. Here a key read back must be
    raw text, and a value raw bytes in the row or a value file under the cache folder named
    as diskcache names them; anything else is a ``Refusal``. A file a row names outside
    that pattern is never opened, nor removed when the row goes.
    """

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"stage cache keys are text, not {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> str | Refusal:
        if raw and type(key) is str:
            return key
        return Refusal("a key that is not text" if raw else "a pickled key")

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> tuple[int, int, str | None, Any]:
        if read or type(value) is not bytes:
            raise TypeError(f"stage cache values are bytes, not {type(value).__name__}")
        return super().store(value, read, key=key)

    def fetch(self, mode: Any, filename: Any, value: Any, read: bool) -> bytes | Refusal:
        if read:
            raise TypeError("stage cache values are read whole")
        if mode == diskcache.core.MODE_RAW:
            return value if type(value) is bytes else Refusal(f"a value of type {type(value).__name__}")
        if mode != diskcache.core.MODE_BINARY:
            return Refusal(_MODES.get(mode, f"an entry of mode {mode!r}"))
        path = self._value_file(filename)
        if path is None:
            return Refusal(f"a value file named {filename!r}, not one of the cache's own")
        with open(path, "rb") as reader:  # an OSError (removed meanwhile) is a miss to diskcache
            return reader.read()

    def remove(self, file_path: Any) -> None:
        if self._value_file(file_path) is not None:
            super().remove(file_path)

    def _value_file(self, filename: Any) -> str | None:
        """The path of a value file the store may read or remove: named as diskcache names them, inside the folder."""
        if not isinstance(filename, str) or not _VALUE_FILE.fullmatch(filename):
            return None
        root = os.path.realpath(self._directory)
        path = os.path.realpath(os.path.join(root, filename))  # a value folder may be a link leading out
        return path if path.startswith(root + os.sep) else None


@functools.cache
def _schema_of_new_store() -> frozenset[tuple[Any, ...]]:
    """The tables, indexes and triggers diskcache makes in a new store with DocPilot's settings (once a process)."""
    with tempfile.TemporaryDirectory(prefix="docpilot-cache-schema-") as folder:
        diskcache.Cache(folder, disk=DataDisk, **_SETTINGS).close()
        with contextlib.closing(sqlite3.connect(Path(folder) / "cache.db")) as db:
            return frozenset(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


def _foreign_part(directory: Path) -> str | None:
    """What the store's database holds that diskcache never makes there, or None when there is nothing of the kind.

    Read before diskcache opens the store, which runs its ``sqlite_*`` settings as PRAGMA
    statements and relies on its own indexes. SQLite's errors (damage) go to the caller.
    """
    database = directory / "cache.db"
    if not database.is_file():
        return None
    with contextlib.closing(sqlite3.connect(database, timeout=60)) as db:
        db.execute("PRAGMA query_only = ON")
        schema = set(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        for kind, name, _, _ in sorted(schema - _schema_of_new_store(), key=str):
            return f"a {kind} {name!r} of another make"
        if not any(row[:2] == ("table", "Settings") for row in schema):
            return None
        for key, value in db.execute("SELECT key, value FROM Settings"):
            if key in diskcache.core.METADATA and type(value) is not int:
                return f"a setting {key!r} of {value!r}"
            if key not in diskcache.core.METADATA and key not in _SETTINGS:
                return f"a setting {key!r}"
    return None


def _open_store(directory: Path) -> diskcache.Cache:
    """The store in ``directory``, once its database is found to hold only what diskcache makes there."""
    found = _foreign_part(directory)
    if found is not None:
        raise CacheForeign(directory, found)
    # No culling on every write (diskcache checks the size limit on each set by default):
    # the limit is far above any eval, and the check costs a query per stored turn.
    return diskcache.Cache(str(directory), disk=DataDisk, **_SETTINGS)


_FORSAKEN: list[diskcache.Cache] = []
"""Stores a forked child inherited and replaced: kept so that they are never closed there."""


class StageCache:
    """Stage results on disk, keyed by ``cache_key``; values are JSON-ready dicts.

    An entry of a kind DocPilot never writes is a miss, and the first one met prints one
    warning naming the cache. A store whose database is foreign (``CacheForeign``) is not
    opened: every look-up is a miss and nothing is stored, with one warning.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._warned = threading.Lock()
        self._warning: str | None = None
        self._opened: diskcache.Cache | None = None
        try:
            with _unreadable(self.directory):
                self._opened = _open_store(self.directory)
        except CacheForeign as exc:
            self._warn(str(exc).replace("\n  fix: ", "; the run goes on without it; fix: "))
        self._pid = os.getpid()

    @property
    def _store(self) -> diskcache.Cache | None:
        """The store, opened again in a forked child process the first time the child uses it.

        SQLite's connections must not cross a fork: the parent goes on using its own. The
        inherited one is kept, unused and unclosed (closing it could disturb the parent's
        locks on the same files). None when the store was found foreign.
        """
        if self._pid != os.getpid():
            if self._opened is not None:
                _FORSAKEN.append(self._opened)
                with _unreadable(self.directory):
                    self._opened = diskcache.Cache(str(self.directory), disk=DataDisk, **_SETTINGS)
            self._pid = os.getpid()
        return self._opened

    # Values are stored as JSON bytes, which diskcache keeps as they are: reading one back
    # costs a fraction of unpickling it, and a re-run reads one per record and stage.

    def get(self, key: str, read: Callable[[dict], T] | None = None) -> T | dict | None:
        """The entry under ``key``, as ``read`` makes it; None when there is none, or it is not one DocPilot wrote.

        ``read`` turns the stored JSON object into what the stage uses, and raises
        ValueError (a pydantic ValidationError is one) when it is not of the stage's shape.
        An entry that is not JSON, not an object, or refused by ``read`` is a miss with a warning.
        """
        store = self._store
        if store is None:
            return None
        with _unreadable(self.directory):
            value = store.get(key)
        if value is None:
            return None
        if isinstance(value, Refusal):
            return self._refuse(value.reason)
        try:
            entry = orjson.loads(value)
        except orjson.JSONDecodeError:
            return self._refuse("bytes that are not JSON")
        if not isinstance(entry, dict):
            return self._refuse(f"JSON of type {type(entry).__name__}, not an object")
        if read is None:
            return entry
        try:
            return read(entry)
        except ValueError:
            return self._refuse("JSON of another shape than the stage stores")

    def set(self, key: str, value: dict) -> None:
        store = self._store
        if store is not None:
            with _unreadable(self.directory):
                store.set(key, orjson.dumps(value))

    def set_many(self, items: list[tuple[str, dict]]) -> None:
        """Store several entries in one transaction: all of them or, after a crash, none."""
        store = self._store
        if store is None:
            return
        with _unreadable(self.directory), store.transact():
            for key, value in items:
                store.set(key, orjson.dumps(value))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def _refuse(self, reason: str) -> None:
        """Read an entry DocPilot never wrote as a miss; the first one of this cache prints a warning."""
        self._warn(f"{self.directory}: the stage cache holds entries DocPilot never writes ({reason}); each is "
                   "read as a miss and its stage runs again; if the cache came from elsewhere (a CI cache), "
                   "run `docpilot cache clear`")

    def _warn(self, message: str) -> None:
        with self._warned:
            if self._warning is not None:
                return
            self._warning = message
        print(f"warning: {message}", file=sys.stderr)

    def __getstate__(self) -> dict:
        return {"directory": self.directory}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"])


def describe_cache(directory: str | Path) -> dict:
    """Entries per stage, keys DocPilot never writes (``foreign``) and bytes on disk of a cache directory.

    An absent directory is empty. A foreign database is ``CacheForeign``, not read.
    """
    directory = Path(directory)
    entries = {stage: 0 for stage in STAGE_VERSIONS}
    if not directory.exists():
        return {"directory": str(directory), "entries": entries, "foreign": 0, "bytes": 0}
    foreign = 0
    with _unreadable(directory):
        store = _open_store(directory)
    try:
        with _unreadable(directory):
            for key in store.iterkeys():
                if isinstance(key, Refusal):
                    foreign += 1
                    continue
                stage = key.split(":", 1)[0]
                entries[stage] = entries.get(stage, 0) + 1
            size = store.volume()
    finally:
        store.close()
    return {"directory": str(directory), "entries": entries, "foreign": foreign, "bytes": size}


def clear_cache(directory: str | Path, *, stage: str | None = None) -> int:
    """Remove every cached result, or one stage's; returns how many were removed.

    A cache too damaged to open, or whose database is foreign, is cleared all the same by
    removing its files (the search index beside it stays); the count is then 0, as
    nothing could be counted.
    """
    directory = Path(directory)
    if not directory.exists():
        return 0
    try:
        with _unreadable(directory):
            store = _open_store(directory)
    except (CacheUnreadable, CacheForeign):
        _remove_store(directory)
        return 0
    try:
        with _unreadable(directory):
            if stage is None:
                return store.clear()
            doomed = [k for k in store.iterkeys() if isinstance(k, str) and k.startswith(f"{stage}:")]
            for key in doomed:
                store.delete(key)
            return len(doomed)
    except CacheUnreadable:
        store.close()
        _remove_store(directory)
        return 0
    finally:
        store.close()


def _remove_store(directory: Path) -> None:
    """Delete the cache's database and value files, and nothing else in the folder."""
    for name in _STORE_FILES:
        (directory / name).unlink(missing_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink() and _VALUE_FOLDER.match(entry.name):
            shutil.rmtree(entry)
