"""The real `docpilot` command in child processes: several started at once, each with a deadline and a memory cap.

A command that hangs (a read of a named pipe nobody writes) is killed at its deadline
and reported as timed out; one that reads without end (``/dev/zero``) meets the
address-space cap and dies of it instead of taking the machine's memory. Starting the
runs together lets a test file check a dozen commands in the time of a few.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

MEMORY_CAP = 1024 * 1024 * 1024
"""Address space a child may use, in bytes: ample for the command, and a quick end to an endless read."""


@dataclass(frozen=True)
class CliRun:
    """How one command ended."""

    args: tuple[str, ...]
    returncode: int | None
    """None when it was killed at its deadline."""
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_all(commands: Mapping[str, Sequence[str]], *, cwd: Path,
            envs: Mapping[str, Mapping[str, str]] | None = None, timeout: float = 30.0) -> dict[str, CliRun]:
    """Start every ``docpilot`` command at once in ``cwd`` and wait for each, at most ``timeout`` seconds in all.

    ``envs`` adds environment variables to the commands it names.
    """
    base = {**os.environ, "PYTHONPATH": str(ROOT), "DOCPILOT_CACHE_DIR": str(cwd / "cache"),
            "DOCPILOT_REPORTS_DIR": str(cwd / "reports")}
    base.pop("DOCPILOT_DEBUG", None)
    started = {}
    for name, args in commands.items():
        env = {**base, **(envs or {}).get(name, {})}
        process = subprocess.Popen([sys.executable, "-m", "docpilot", *args], cwd=cwd, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, preexec_fn=_cap_memory)
        started[name] = (process, tuple(args), time.monotonic())
    deadline = time.monotonic() + timeout
    results = {}
    for name, (process, args, began) in started.items():
        try:
            stdout, stderr = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            code = None
        results[name] = CliRun(args, code, stdout, stderr, time.monotonic() - began)
    return results


def refusal(run) -> str:
    """The stderr of a command known to have stopped by itself with exit 2 and no traceback."""
    assert not run.timed_out, f"{run.args} still running at its deadline: it hangs"
    assert run.returncode == 2, (run.args, run.returncode, run.stdout[-1000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    return run.stderr
