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
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The folder that holds the ``docpilot`` package (in a checkout, also the ``metrics``, ``tasks`` and
``flows`` folders that install as ``docpilot.metrics``, ...)."""


def digest_code(*modules: str) -> str:
    """sha256 over the source of the named modules and packages (a package: every ``.py`` file under it).

    Names are dotted, as imported: ``docpilot.retrieval`` (a package) or
    ``docpilot.metrics.gold`` (a module). A name that is neither is a mistake in the caller's
    list and raises ``LookupError``.
    """
    return _digest(tuple(sorted(set(modules))))


@functools.cache
def _digest(modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for label, path in _source_files(modules):
        digest.update(label.encode() + b"\x00")
        digest.update(path.read_bytes())
        digest.update(b"\x01")
    return digest.hexdigest()


def _source_files(modules: tuple[str, ...]) -> list[tuple[str, Path]]:
    """Every source file of the named modules, each once, in a fixed order, named by where it sits in the package.

    The files are found where the modules are imported from (``docpilot.metrics`` lives in
    the repository's ``metrics/`` folder), and named by the package path, so the digest is
    the same whichever folder holds them.
    """
    files: dict[str, Path] = {}
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise LookupError(f"no module or package {name!r} under {ROOT}")
        prefix = name.replace(".", "/")
        if spec.submodule_search_locations:
            base = Path(spec.origin).parent
            for path in base.rglob("*.py"):
                if "__pycache__" not in path.parts:
                    files[f"{prefix}/{path.relative_to(base).as_posix()}"] = path
        else:
            files[f"{prefix}.py"] = Path(spec.origin)
    return sorted(files.items())
