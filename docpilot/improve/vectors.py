"""Vectors of the short texts ``improve`` embeds (questions, single words), kept on disk between runs.

Trying a vocabulary entry searches every dev question again, and relating two words
embeds each; with MiniLM that is most of an ``improve``'s time, every time, for the
same texts. ``RememberingEmbedder`` wraps the run's embedder: each text is embedded
once per process, and what was embedded is saved beside the run's cache
(``<cache_dir>/improve-vectors/<embedder digest>/``), so a second ``improve`` of the
same run embeds nothing. The folder is data: one ``.npz`` of two arrays read with
``allow_pickle=False`` and checked against what is written; one that is not is
ignored and written over.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from docpilot.retrieval.embedders import Embedder

FOLDER = "improve-vectors"
"""The folder under the run's cache_dir that holds the vectors."""

MAX_KEPT = 50_000
"""Texts kept at most; past it the oldest are dropped when the vectors are saved."""

_HASH_BYTES = 16
_FILE = "vectors.npz"


class RememberingEmbedder:
    """An embedder that embeds each text once and keeps the vectors in a folder (None: in memory only)."""

    def __init__(self, embedder: Embedder, folder: Path | None = None) -> None:
        self.inner = embedder
        self.name = embedder.name  # the same vectors: an index built with the inner embedder fits
        self.folder = folder
        """The folder the vectors of every embedder are kept under."""
        self._folder = folder / _digest(embedder.name)[:20] if folder is not None else None
        self._vectors: dict[bytes, np.ndarray] = {}
        self._new = 0
        self._loaded = False

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit row per text, as the inner embedder gives it; texts seen before are not embedded again."""
        self._load()
        keys = [_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            for key, vector in zip(missing, self.inner.embed([text_of[k] for k in missing]), strict=True):
                self._vectors[key] = np.asarray(vector, dtype=np.float32)
            self._new += len(missing)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys])

    def save(self) -> None:
        """Write the vectors to the folder when any were embedded; a folder that cannot be written is skipped."""
        if self._folder is None or not self._new:
            return
        items = list(self._vectors.items())[-MAX_KEPT:]
        hashes = np.frombuffer(b"".join(k for k, _ in items), dtype=np.uint8).reshape(-1, _HASH_BYTES)
        vectors = np.stack([v for _, v in items]).astype(np.float32)
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".vectors.", suffix=".tmp", dir=self._folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    np.savez(handle, hashes=hashes, vectors=vectors)
                os.replace(tmp, self._folder / _FILE)
            finally:
                Path(tmp).unlink(missing_ok=True)
        except OSError:
            return  # only a later run's speed depends on it
        self._new = 0

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self._folder is None:
            return
        try:
            stored = np.load(self._folder / _FILE, allow_pickle=False)
        except (OSError, ValueError):
            return
        if not isinstance(stored, np.lib.npyio.NpzFile):
            return  # a bare array where the two should be: not what save writes
        try:
            with stored:
                hashes, vectors = stored["hashes"], stored["vectors"]
        except (OSError, ValueError, KeyError):
            return
        fits = (hashes.dtype == np.uint8 and hashes.ndim == 2 and hashes.shape[1] == _HASH_BYTES
                and vectors.dtype == np.float32 and vectors.shape == (len(hashes), self.dim))
        if fits:
            self._vectors = {row.tobytes(): vector for row, vector in zip(hashes, vectors, strict=True)}


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=_HASH_BYTES).digest()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
