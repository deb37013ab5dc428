"""Digests of the project's own source code, so a cached result names the code that computed it.

A stage's cache key, the search index's fingerprint and the model's identity each hold
a digest of the modules whose code decides their result. It is derived from the source
files themselves, so an edit to any of them gives new keys, and nobody has to remember
to raise a version number. The files are those of the code that was imported: run
from a copy of the tree (``PYTHONPATH`` pointing at it) and the copy's files are read.

Each digest is worked out once per process: the code that runs is the code that was
loaded when the process started.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds the ``docpilot`` package and its sibling packages (``metrics``, ...)."""


def digest_code(*modules: str) -> str:
    """sha256 over the source of the named modules and packages (a package: every ``.py`` file under it).

    Names are dotted, as imported: ``docpilot.retrieval`` (a package) or
    ``metrics.gold`` (a module). A name that is neither is a mistake in the caller's
    list and raises ``LookupError``.
    """
    return _digest(tuple(sorted(set(modules))))


@functools.cache
def _digest(modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for path in _source_files(modules):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\x00")
        digest.update(path.read_bytes())
        digest.update(b"\x01")
    return digest.hexdigest()


def _source_files(modules: tuple[str, ...]) -> list[Path]:
    """Every source file of the named modules, each once, in a fixed order."""
    files: set[Path] = set()
    for name in modules:
        base = ROOT.joinpath(*name.split("."))
        if base.is_dir() and (base / "__init__.py").is_file():
            files.update(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)
        elif base.with_suffix(".py").is_file():
            files.add(base.with_suffix(".py"))
        else:
            raise LookupError(f"no module or package {name!r} under {ROOT}")
    return sorted(files)
