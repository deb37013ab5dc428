"""A temporary folder for a whole test process (a module's saved index, Prefect's home), removed when it exits."""

from __future__ import annotations

import atexit
import shutil
import tempfile


def scratch_folder(prefix: str) -> str:
    """A new folder under the system's temporary folder; it goes when the test process exits.

    For what a test module shares across its tests (``tmp_path`` is one test's). Without
    the removal, every run of the suite left a few of these behind, and they added up.
    """
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
