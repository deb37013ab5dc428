"""A per-record, per-stage result cache on disk.

Each entry's key hashes exactly what the stage's result depends on, prefixed by the
stage name and its version: ``model:3:<sha256 of messages, provider, model, params>``.
The store is diskcache (SQLite underneath), so entries written before a crash are
there on the next run, and several processes may share one cache directory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import diskcache
import orjson

# A version changes when what a stage's key covers, or how it is written, changes; the
# entries under older keys are then never read again (``docpilot cache clear`` drops them).
STAGE_VERSIONS = {"retrieve": "2", "model": "3"}

_KEY_JSON = orjson.OPT_SORT_KEYS


def cache_key(stage: str, *parts: Any) -> str:
    """The key of one stage result: stage, stage version and a hash of its inputs.

    The inputs are written as JSON with sorted keys (orjson: a primed prompt of a few
    kilobytes takes a few microseconds, where the standard library takes forty), so equal
    inputs give equal keys whatever the order their dicts were built in.
    """
    digest = hashlib.sha256(orjson.dumps(parts, option=_KEY_JSON, default=str)).hexdigest()
    return f"{stage}:{STAGE_VERSIONS[stage]}:{digest}"


class StageCache:
    """Stage results on disk, keyed by ``cache_key``; values are JSON-ready dicts."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # No culling on every write (diskcache checks the size limit on each set by default):
        # the limit is far above any eval, and the check costs a query per stored turn.
        self._store = diskcache.Cache(str(self.directory), size_limit=2**34, cull_limit=0)

    # Values are stored as JSON bytes, which diskcache keeps as they are: reading one back
    # costs a fraction of unpickling it, and a re-run reads one per record and stage.

    def get(self, key: str) -> dict | None:
        value = self._store.get(key)
        return None if value is None else orjson.loads(value)

    def set(self, key: str, value: dict) -> None:
        self._store.set(key, orjson.dumps(value))

    def set_many(self, items: list[tuple[str, dict]]) -> None:
        """Store several entries in one transaction: all of them or, after a crash, none."""
        with self._store.transact():
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
        for key in cache._store.iterkeys():
            stage = str(key).split(":", 1)[0]
            entries[stage] = entries.get(stage, 0) + 1
        size = cache._store.volume()
    finally:
        cache.close()
    return {"directory": str(directory), "entries": entries, "bytes": size}


def clear_cache(directory: str | Path, *, stage: str | None = None) -> int:
    """Remove every cached result, or one stage's; returns how many were removed."""
    directory = Path(directory)
    if not directory.exists():
        return 0
    cache = StageCache(directory)
    try:
        if stage is None:
            return cache._store.clear()
        doomed = [k for k in cache._store.iterkeys() if str(k).startswith(f"{stage}:")]
        for key in doomed:
            cache._store.delete(key)
        return len(doomed)
    finally:
        cache.close()
