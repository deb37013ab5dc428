"""The search index: what a retriever scores questions against, built once and kept on disk.

An index holds, for the chunks of one corpus, the BM25 matrix (``bm25`` and
``hybrid``) and the chunk embeddings (``dense`` and ``hybrid``). It is saved in a
folder named by its fingerprint, a hash of every text it was built from and every
setting that shaped it, so a saved index is reused exactly while neither changed:

    <index_dir>/<fingerprint[:20]>/
        manifest.json        what it holds, how long it took, the full fingerprint
        bm25/                the BM25 weights by term (data, indices, indptr as .npy) and
                             the vocabulary (vocabulary.json)
        vectors.npy          one unit-length float32 row per chunk
        text_hashes.npy      a hash of each embedded text, so a rebuild re-embeds only
                             the chunks whose text changed

Every array is read back with ``allow_pickle=False`` and checked against what a build
writes; a folder that holds anything else is built again over, so an index folder
restored from elsewhere can cost a rebuild but never runs code.

A build writes into a temporary folder and renames it into place, so a crash or a
second process building the same index never leaves half an index behind. After a
build, older indexes of the same docs folder and the same settings are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from docpilot import progress
from docpilot.codebase import digest_code
from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import Chunk, Corpus
from docpilot.errors import StorageError
from docpilot.retrieval.bm25 import LexicalIndex
from docpilot.retrieval.embedders import Embedder

# Bump when the layout of what is stored changes. A change of the code that builds an
# index needs no bump: the fingerprint holds a digest of that code (``index_code``).
INDEX_FORMAT = "docpilot-index-3"
MANIFEST = "manifest.json"
_FOLDER_CHARS = 20
_DONORS = 4  # older indexes searched for vectors to reuse
_HASH_BYTES = 16
EMBED_STAGE = "embed"
"""The progress stage of embedding chunks while an index is built."""
_EMBED_SLICE = 256  # chunks per embed call while building, and per progress step
# Include directives (`{* ../docs_src/app.py hl[3] *}`, `--8<-- "snippet.md"`) name a
# file that is not in the docs folder: their words ("docs", "src", "py") are paths, and
# a question about "the docs" should not match every page that includes an example.
_INCLUDE = re.compile(r"\{\*[^{}\n]*\*\}|^[ \t]*-{2}8<-{2}.*$", re.MULTILINE)
# The modules whose code decides what an index holds: the indexed texts and the BM25
# weights, and apart from them the vectors (the embedders and the model they run).
_LEXICAL_CODE = ("docpilot.retrieval.index", "docpilot.retrieval.bm25", "docpilot.retrieval.tokens")
_VECTOR_CODE = ("docpilot.retrieval.index", "docpilot.retrieval.embedders", "docpilot.retrieval.bert",
                "docpilot.retrieval.model_files", "docpilot.retrieval.pooling", "docpilot.retrieval.wordpiece")


def indexed_body(text: str) -> str:
    """A chunk's text as the index reads it: include directives left out, the rest as written."""
    return _INCLUDE.sub(" ", text) if ("{*" in text or "8<" in text) else text


def lexical_text(corpus: Corpus, chunk: Chunk, settings: RetrievalConfig) -> str:
    """What BM25 indexes for a chunk: heading path, description and keywords, then the text (see ``indexed_body``).

    The heading path starts with the page title; it and the page's description and
    keywords are repeated ``title_weight`` and ``description_weight`` times, which is
    how BM25 over one field weights them above the body.
    """
    page = corpus.pages[chunk.page_id]
    parts = [" ".join(chunk.heading_path)] * settings.title_weight
    about = " ".join(filter(None, [page.description or "", " ".join(page.keywords)]))
    if about:
        parts.extend([about] * settings.description_weight)
    parts.append(indexed_body(chunk.text))
    return "\n".join(parts)


def dense_text(corpus: Corpus, chunk: Chunk) -> str:
    """What an embedder reads for a chunk: heading path, description, text (the model truncates the end)."""
    page = corpus.pages[chunk.page_id]
    head = " › ".join(chunk.heading_path)
    return "\n".join(filter(None, [head, page.description or "", indexed_body(chunk.text)]))


def uses_bm25(settings: RetrievalConfig) -> bool:
    """Whether the configured retriever ranks with BM25."""
    return settings.retriever in ("bm25", "hybrid")


def uses_vectors(settings: RetrievalConfig) -> bool:
    """Whether the configured retriever ranks with embeddings."""
    return settings.retriever in ("dense", "hybrid")


@dataclass
class SearchIndex:
    """A built or loaded index: BM25, vectors or both, over one corpus's chunks in order."""

    fingerprint: str
    """Hash of the indexed texts and the settings that shaped the index."""
    lexical: LexicalIndex | None
    """BM25 over the chunks' lexical texts, for ``bm25`` and ``hybrid``."""
    vectors: np.ndarray | None
    """Unit-length chunk embeddings, one row per chunk, for ``dense`` and ``hybrid``."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """What the index holds and how it was built (the content of ``manifest.json``)."""
    path: Path | None = None
    """The folder it was saved in or loaded from; None when it lives in memory only."""
    built: bool = True
    """True when this process built it; False when it was loaded from disk."""
    text_hashes: np.ndarray | None = None
    """A hash of each chunk's embedded text, saved so a later build can reuse its vectors."""


def settings_key(settings: RetrievalConfig, embedder: Embedder | None) -> dict[str, Any]:
    """The settings that shape an index (not those read only at question time)."""
    key: dict[str, Any] = {"format": INDEX_FORMAT, "retriever": settings.retriever}
    if uses_bm25(settings):
        key |= {
            "k1": settings.k1,
            "b": settings.b,
            "title_weight": settings.title_weight,
            "description_weight": settings.description_weight,
        }
    if uses_vectors(settings):
        key["embedder"] = embedder.name if embedder is not None else None
    return key


def index_code(settings: RetrievalConfig) -> str:
    """A digest of the code that builds an index for these settings: BM25's, the embedders' or both."""
    modules = (_LEXICAL_CODE if uses_bm25(settings) else ()) + (_VECTOR_CODE if uses_vectors(settings) else ())
    return digest_code(*modules)


def index_fingerprint(corpus: Corpus, settings: RetrievalConfig, embedder: Embedder | None = None) -> str:
    """Hash of every chunk id and indexed text plus the shaping settings and the code that builds it.

    Hashing the texts themselves, not only the files, catches a change of
    ``corpus.chunk_words`` too, which splits the same files differently. The embedder's
    ``name`` stands for its model (the minilm embedder's names its weights' digest).
    """
    digest = hashlib.sha256(json.dumps(settings_key(settings, embedder), sort_keys=True).encode())
    digest.update(index_code(settings).encode())
    digest.update(corpus.fingerprint.encode())
    for chunk in corpus.chunks:
        digest.update(f"\x00{chunk.id}\x01".encode())
        if uses_bm25(settings):
            digest.update(lexical_text(corpus, chunk, settings).encode())
        if uses_vectors(settings):
            digest.update(b"\x02" + dense_text(corpus, chunk).encode())
    return digest.hexdigest()


def build_index(
    corpus: Corpus,
    settings: RetrievalConfig,
    embedder: Embedder | None = None,
    *,
    donors: Sequence[Path] = (),
    fingerprint: str | None = None,
) -> SearchIndex:
    """Build an index in memory; vectors of unchanged texts are copied from ``donors`` folders."""
    start = time.perf_counter()
    fingerprint = fingerprint or index_fingerprint(corpus, settings, embedder)
    lexical = vectors = None
    manifest: dict[str, Any] = {
        "format": INDEX_FORMAT,
        "fingerprint": fingerprint,
        "settings_key": _short_hash(settings_key(settings, embedder)),
        "docs": str(corpus.root),
        "retriever": settings.retriever,
        "pages": len(corpus.pages),
        "sections": len(corpus.sections),
        "chunks": len(corpus.chunks),
        "chunk_ids": _short_hash([c.id for c in corpus.chunks]),
        "vocabulary": None,
        "embedder": None,
        "dim": None,
    }
    if uses_bm25(settings):
        texts = [lexical_text(corpus, c, settings) for c in corpus.chunks]
        lexical = LexicalIndex.build(texts, k1=settings.k1, b=settings.b)
        manifest["vocabulary"] = len(lexical.vocabulary)
    hashes = None
    if uses_vectors(settings):
        if embedder is None:
            raise ValueError(f"retriever {settings.retriever!r} needs an embedder")
        texts = [dense_text(corpus, c) for c in corpus.chunks]
        hashes = _text_hashes(texts)
        vectors, reused = _embed(texts, hashes, embedder, donors)
        manifest |= {"embedder": embedder.name, "embedder_code": digest_code(*_VECTOR_CODE),
                     "dim": int(vectors.shape[1]), "reused_vectors": reused}
    manifest["build_seconds"] = round(time.perf_counter() - start, 3)
    manifest["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return SearchIndex(fingerprint, lexical, vectors, manifest, text_hashes=hashes)


def open_index(
    corpus: Corpus,
    settings: RetrievalConfig,
    directory: str | Path,
    embedder: Embedder | None = None,
    *,
    rebuild: bool = False,
) -> SearchIndex:
    """Load the saved index for this corpus and these settings, or build and save it.

    ``rebuild`` builds afresh even when a saved index matches (and reuses no vectors).
    """
    root = Path(directory)
    fingerprint = index_fingerprint(corpus, settings, embedder)
    folder = root / fingerprint[:_FOLDER_CHARS]
    if not rebuild:
        loaded = _load(folder, fingerprint, len(corpus.chunks))
        if loaded is not None:
            return loaded
    donors = [] if rebuild or not uses_vectors(settings) else _donors(root, embedder)
    index = build_index(corpus, settings, embedder, donors=donors, fingerprint=fingerprint)
    _save(index, folder)
    _prune(root, index.manifest, keep=folder)
    return index


def is_saved(corpus: Corpus, settings: RetrievalConfig, root: Path, embedder: Embedder | None = None) -> bool:
    """Whether an index of ``corpus`` with these settings is saved under ``root``: opening it builds nothing."""
    return (root / index_fingerprint(corpus, settings, embedder)[:_FOLDER_CHARS] / MANIFEST).is_file()


def folder_size(path: Path) -> int:
    """Bytes of every file under a folder."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _short_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _text_hashes(texts: Sequence[str]) -> np.ndarray:
    return np.array(
        [hashlib.blake2b(t.encode(), digest_size=_HASH_BYTES).digest() for t in texts], dtype=f"S{_HASH_BYTES}"
    )


def _embed(texts: list[str], hashes: np.ndarray, embedder: Embedder, donors: Sequence[Path]) -> tuple[np.ndarray, int]:
    """Embed the texts, copying the vector of any text an older index already embedded."""
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    missing = np.ones(len(texts), dtype=bool)
    for donor in donors:
        if not missing.any():
            break
        try:
            old_hashes = np.load(donor / "text_hashes.npy", allow_pickle=False)
            old_vectors = np.load(donor / "vectors.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            continue  # a donor removed or damaged meanwhile only costs its reuse
        if not _vectors_of(old_vectors, vectors.shape[1]) or old_hashes.shape != (len(old_vectors),) \
                or old_hashes.dtype != hashes.dtype:
            continue  # not what a build saves: damaged, or written by something else
        rows = {h: i for i, h in enumerate(old_hashes.tolist())}
        for i in np.flatnonzero(missing):
            row = rows.get(hashes[i])
            if row is not None:
                vectors[i] = old_vectors[row]
                missing[i] = False
    todo = np.flatnonzero(missing)
    if len(todo):
        # In slices, so that a long build (minutes with a local model) shows how far it is.
        progress.start(EMBED_STAGE, len(todo))
        for start in range(0, len(todo), _EMBED_SLICE):
            rows = todo[start : start + _EMBED_SLICE]
            vectors[rows] = embedder.embed([texts[i] for i in rows])
            progress.advance(EMBED_STAGE, len(rows))
    return vectors, int(len(texts) - len(todo))


def _load(folder: Path, fingerprint: str, chunks: int) -> SearchIndex | None:
    """The saved index in ``folder`` when it is whole and has this fingerprint, else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT \
            or manifest.get("fingerprint") != fingerprint:
        return None
    # Arrays load with allow_pickle=False and must be what a build saves: an index folder
    # may come from elsewhere (a CI cache), and reading it must never run code.
    try:
        lexical = LexicalIndex.load(folder / "bm25") if (folder / "bm25").is_dir() else None
        vectors = np.load(folder / "vectors.npy", allow_pickle=False) if (folder / "vectors.npy").is_file() else None
    except (OSError, ValueError, KeyError):
        return None  # damaged, or not an index's: the caller rebuilds over it
    if vectors is not None and not _vectors_of(vectors, manifest.get("dim")):
        return None
    sizes = [x.size for x in (lexical,) if x is not None] + [len(v) for v in (vectors,) if v is not None]
    if any(size != chunks for size in sizes) or (manifest.get("vocabulary") is not None) != (lexical is not None):
        return None
    return SearchIndex(fingerprint, lexical, vectors, manifest, path=folder, built=False)


def _vectors_of(vectors: np.ndarray, dim: object) -> bool:
    """Whether a loaded array is what a build saves as vectors: float32 rows of the index's dimension."""
    return vectors.dtype == np.float32 and vectors.ndim == 2 and type(dim) is int and vectors.shape[1] == dim


def _save(index: SearchIndex, folder: Path) -> None:
    """Write the index to a temporary sibling folder, then rename it into place.

    A write that fails (a full disk, a file-size limit) raises StorageError and leaves
    the folder as it was: the staging copy is removed, and a saved index is replaced only
    once the new one is whole.
    """
    try:
        _stage(index, folder)
    except OSError as exc:
        raise StorageError(
            "search index", folder, exc, kept="the index folder was left as it was"
        ) from None
    index.path = folder


def _stage(index: SearchIndex, folder: Path) -> None:
    """The writes of ``_save``, whose OSErrors it names."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".building-{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        if index.lexical is not None:
            index.lexical.save(staging / "bm25")
        if index.vectors is not None and index.text_hashes is not None:
            np.save(staging / "vectors.npy", index.vectors)
            np.save(staging / "text_hashes.npy", index.text_hashes)
        (staging / MANIFEST).write_text(json.dumps(index.manifest, indent=2), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)  # stale or damaged, or rebuilt on request
        try:
            staging.rename(folder)
        except OSError:
            if not (folder / MANIFEST).is_file():
                raise
            # Another process saved the same index first; theirs is as good as ours.
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _manifests(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every saved index under ``root`` with its manifest, newest first; unreadable ones are skipped."""
    found = []
    for folder in root.iterdir() if root.is_dir() else ():
        if folder.name.startswith("."):
            continue  # a build in progress
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            if isinstance(manifest, dict):  # anything else is not an index's manifest
                found.append((folder.stat().st_mtime, folder, manifest))
        except (OSError, ValueError):
            continue  # removed by another process meanwhile, or damaged
    found.sort(key=lambda item: item[0], reverse=True)
    return [(folder, manifest) for _, folder, manifest in found]


def _donors(root: Path, embedder: Embedder | None) -> list[Path]:
    """Saved indexes, newest first, whose vectors came from the same embedder running the same code."""
    if embedder is None:
        return []
    code = digest_code(*_VECTOR_CODE)
    same = [folder for folder, m in _manifests(root)
            if m.get("embedder") == embedder.name and m.get("embedder_code") == code]
    return same[:_DONORS]


def _prune(root: Path, manifest: dict[str, Any], *, keep: Path) -> None:
    """Remove older indexes of the same docs folder built with the same settings: nothing reads them again."""
    for folder, other in _manifests(root):
        if folder == keep:
            continue
        if other.get("docs") == manifest["docs"] and other.get("settings_key") == manifest["settings_key"]:
            shutil.rmtree(folder, ignore_errors=True)
