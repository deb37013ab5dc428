"""Child processes that die with the run: a watcher stops what a killed eval left running.

An eval under Prefect starts helpers of its own: Prefect's temporary API server, a
Dask cluster, a `docpilot serve`. They stop when the eval ends, even on Ctrl-C or
SIGTERM; but ``kill -9`` (or the out-of-memory killer) ends the eval without a word,
and the helpers would run on, holding a port and memory, until someone found them.

``watch_children`` starts one small watcher process per eval process. Twice a second
it notes the eval's descendants; once the eval is gone it stops those that are still
running (SIGTERM, then SIGKILL after a grace period). An eval that exits on its own
stops its helpers itself and then the watcher, at exit, so nothing is left running
either way. Each is recognised by its
process id and its start time together, so a process id reused by the system after
a helper ended is never touched. Linux only (it reads ``/proc``); elsewhere it does
nothing.

    python -m docpilot.run.reaper <pid>     the watcher itself
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.5
"""How often the watcher notes the eval's descendants."""
GRACE_S = 5.0
"""How long a helper has to stop on SIGTERM before it is killed."""

_started_for: int | None = None


def watch_children() -> None:
    """Start the watcher for this process, once; a no-op where ``/proc`` is missing."""
    global _started_for
    if _started_for == os.getpid() or not Path("/proc/self/stat").exists():
        return
    _started_for = os.getpid()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "docpilot.run.reaper", str(os.getpid())],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C in the terminal must not stop the watcher before the eval
        close_fds=True,
    )  # fmt: skip
    # Registered before any helper starts, so it runs after their own exit handlers (such
    # as Prefect's, which stops its temporary server): the watcher goes last.
    atexit.register(_stop_watcher, watcher)


def stop_child(process: subprocess.Popen, *, grace_s: float = 10.0) -> None:
    """Stop a child process the run started: SIGTERM, then SIGKILL if it is still there after ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _stop_watcher(watcher: subprocess.Popen) -> None:
    if watcher.poll() is None:
        watcher.kill()
        watcher.wait()


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and start time (clock ticks since boot); None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[0], int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every process below ``pid``, as process id → start time."""
    found: dict[int, int] = {}
    queue = [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        for task in tasks:
            try:
                children = (task / "children").read_text().split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            for child in map(int, children):
                stat = _stat(child)
                if stat is not None and child not in found:
                    found[child] = stat[1]
                    queue.append(child)
    return found


def _alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == started and stat[0] != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def watch(parent: int) -> None:
    """Note ``parent``'s descendants until it is gone, then stop those still running."""
    me = os.getpid()
    first = _stat(parent)
    if first is None:
        return
    known: dict[int, int] = {}
    while _alive(parent, first[1]):
        known = {pid: started for pid, started in descendants(parent).items() if pid != me}
        time.sleep(POLL_S)
    left = {pid: started for pid, started in known.items() if _alive(pid, started)}
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pid: started for pid, started in left.items() if _alive(pid, started)}
    for pid in left:
        _signal(pid, signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]))
