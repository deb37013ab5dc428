"""A per-record, per-stage result cache on disk.

Each entry's key hashes exactly what the stage's result depends on, prefixed by the
stage name and its version: ``model:1:<sha256 of messages, provider, model, params>``.
The store is diskcache (SQLite underneath), so entries written before a crash are
there on the next run, and several processes may share one cache directory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import diskcache

STAGE_VERSIONS = {"retrieve": "1", "model": "1"}


def cache_key(stage: str, *parts: Any) -> str:
    """The key of one stage result: stage, stage version and a hash of its inputs."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    return f"{stage}:{STAGE_VERSIONS[stage]}:{digest}"


class StageCache:
    """Stage results on disk, keyed by ``cache_key``; values are JSON-ready dicts."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._store = diskcache.Cache(str(self.directory), size_limit=2**34)

    def get(self, key: str) -> dict | None:
        return self._store.get(key)

    def set(self, key: str, value: dict) -> None:
        self._store.set(key, value)

    def close(self) -> None:
        self._store.close()

    def __getstate__(self) -> dict:
        return {"directory": self.directory}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"])
