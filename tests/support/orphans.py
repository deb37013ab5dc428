"""Finding the processes a test's command left behind: every process started under a mark in its environment.

A process killed with SIGKILL leaves its children to the system, and they are no longer
its descendants; so a test starts the command with ``DOCPILOT_TEST_MARK`` set to a fresh
value, which every process below it inherits, and looks for that value afterwards.

    mark, env = marked_env()
    run = subprocess.Popen(command, env=env)
    child = wait_for_descendant(run.pid, lambda line: "serve" in line)
    run.kill()
    assert survivors(mark) == []
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.conftest import ROOT

MARK = "DOCPILOT_TEST_MARK"
"""The environment variable that marks a test's processes."""


def marked_env(**extra: str) -> tuple[str, dict[str, str]]:
    """A fresh mark, and the environment to start a command under it (the checkout on its path)."""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(PYTHONPATH=path, **{MARK: mark}, **extra)
    return mark, env


def processes_marked(mark: str) -> list[psutil.Process]:
    """The running processes (zombies aside) whose environment carries ``mark``."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARK) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def survivors(mark: str, within_s: float = 15.0) -> list[str]:
    """What still runs under ``mark`` after ``within_s`` seconds (as "pid: command line"); [] as soon as none does."""
    deadline = time.monotonic() + within_s
    while True:
        left = processes_marked(mark)
        if not left or time.monotonic() > deadline:
            return [_describe(process) for process in left]
        time.sleep(0.1)


def wait_for_descendant(pid: int, wanted: Callable[[str], bool], timeout_s: float = 120.0) -> psutil.Process:
    """The first process below ``pid`` whose command line (space-joined) ``wanted`` accepts; looked for every 5 ms."""
    parent = psutil.Process(pid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not parent.is_running() or parent.status() == psutil.STATUS_ZOMBIE:
            raise AssertionError(f"process {pid} ended before the child it should start was seen")
        for child in parent.children(recursive=True):
            try:
                if wanted(" ".join(child.cmdline())):
                    return child
            except psutil.Error:
                continue
        time.sleep(0.005)
    raise AssertionError(f"no child of process {pid} matched within {timeout_s:g} s")


def wait_for_children(process: psutil.Process, count: int, timeout_s: float = 120.0) -> list[psutil.Process]:
    """``process``'s children once it has at least ``count`` of them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = process.children()
        if len(children) >= count:
            return children
        time.sleep(0.01)
    raise AssertionError(f"process {process.pid} did not start {count} children within {timeout_s:g} s")


def _describe(process: psutil.Process) -> str:
    try:
        return f"{process.pid}: {' '.join(process.cmdline())[:200]}"
    except psutil.Error:
        return f"{process.pid}: (gone)"


def left_in(folder: Path, pattern: str, within_s: float = 15.0) -> list[str]:
    """The entries of ``folder`` that match ``pattern`` after ``within_s`` seconds; [] as soon as there are none."""
    deadline = time.monotonic() + within_s
    while True:
        found = sorted(path.name for path in folder.glob(pattern))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
