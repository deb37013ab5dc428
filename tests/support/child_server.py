"""Running a test server as a child process, for measurements where it must not share the client's interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any


@contextmanager
def serve_in_process(module: str, reply: Any) -> Iterator[str]:
    """Run ``python -m <module> <reply as JSON>`` from the repository; yields its base URL.

    The module prints the port it listens on, then serves until it is stopped.
    """
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(
        [sys.executable, "-m", module, json.dumps(asdict(reply))], cwd=root, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.strip().isdigit():
            raise RuntimeError(f"the server process {module} did not start (it said {line!r})")
        yield f"http://127.0.0.1:{int(line)}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()
