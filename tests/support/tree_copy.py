"""A copy of the project's packages in a folder, and evals run from it in a subprocess.

A test that edits a source file does so in the copy; ``PYTHONPATH`` pointing at the
copy makes the subprocess import that code instead of the checkout's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("docpilot", "metrics", "tasks", "flows")


def copy_tree(folder: Path) -> Path:
    """Copy the project's packages into ``folder`` (made here) and return it."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def edit_source(tree: Path, relative: str, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in a source file of the copy."""
    path = tree / relative
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{relative} holds {old!r} {text.count(old)} times"
    path.write_text(text.replace(old, new), encoding="utf-8")


def eval_from(tree: Path, out: Path, *args: str, cwd: Path) -> dict:
    """Run ``docpilot eval`` on the code in ``tree``, with ``args``; the report it wrote.

    The cache and reports folders come from the environment (tests/conftest.py sets them
    per test), so runs of one test share one cache.
    """
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, "-m", "docpilot", "eval", "--out", str(out), *args]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    return report
