"""Child processes that die with the run: a watcher stops what a killed eval left running.

An eval under Prefect starts helpers: Prefect's temporary API server, a Dask cluster,
a `docpilot serve`. They stop when the eval ends, even on Ctrl-C or SIGTERM; and those
DocPilot starts itself get a parent-death signal (``docpilot.processes``), so even
``kill -9`` of the eval ends them. A helper started by a library (Prefect's temporary
server) has no such signal, and a helper's own children are signalled only when the
helper dies; the watcher is there for them.

``watch_children`` starts one small watcher process per eval process and marks the
eval's environment, so that every process started after it, and every process those
start, carries the mark (the environment variable ``DOCPILOT_WATCHED_BY``). The
watcher wakes the moment the eval is gone; then it stops every process that carries
the mark, and the eval's descendants it had noted twice a second, that are still
running (SIGTERM, then SIGKILL after a grace period). The mark finds a helper however
briefly it ran before the eval died, and however far below the eval it is, since an
orphan is no longer anyone's descendant. An eval that exits on its own stops its
helpers itself and then the watcher, at exit, so nothing is left running either way.
Each process is recognised by its process id and its start time together, so a
process id reused by the system after a helper ended is never touched. The eval also
tells the watcher, through its standard input, of every temporary folder it makes for
a helper (``processes.scratch_folder``: a Prefect server's home, a local server's
config and log), before the helper starts; once the helpers are stopped, the watcher
removes those the eval did not live to remove, and only folders of DocPilot's own
(``docpilot-…``) directly in the system's temporary folder. Linux only (it reads
``/proc``); elsewhere it does nothing.

    python -m docpilot.run.reaper <pid> <mark>     the watcher itself
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from docpilot.processes import on_scratch_folder, stop_child

__all__ = ["GRACE_S", "MARK_VARIABLE", "POLL_S", "descendants", "marked", "stop_child", "watch", "watch_children"]

POLL_S = 0.5
"""How often the watcher notes the eval's descendants."""
GRACE_S = 5.0
"""How long a helper has to stop on SIGTERM before it is killed."""
MARK_VARIABLE = "DOCPILOT_WATCHED_BY"
"""The environment variable that lists the marks of the watchers a process was started under, space-separated."""

_started_for: int | None = None


def watch_children() -> None:
    """Start the watcher for this process, once, and mark what it starts from now on; a no-op without ``/proc``."""
    global _started_for
    me = os.getpid()
    stat = _stat(me)
    if _started_for == me or stat is None:
        return
    _started_for = me
    mark = f"{me}.{stat[1]}"  # process id and start time: no other process will ever have both
    watcher = subprocess.Popen(
        [sys.executable, "-m", "docpilot.run.reaper", str(me), mark],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C in the terminal must not stop the watcher before the eval
        close_fds=True,
    )  # fmt: skip
    on_scratch_folder(lambda folder: _tell(watcher, folder))
    # After the watcher started, so it does not carry the mark it looks for.
    os.environ[MARK_VARIABLE] = " ".join(filter(None, [os.environ.get(MARK_VARIABLE, ""), mark]))
    # Registered before any helper starts, so it runs after their own exit handlers (such
    # as Prefect's, which stops its temporary server): the watcher goes last.
    atexit.register(_stop_watcher, watcher)


def _tell(watcher: subprocess.Popen, folder: str) -> None:
    """Tell the watcher of a temporary folder made for a helper: one line of its standard input."""
    if watcher.stdin is not None and watcher.poll() is None:
        watcher.stdin.write(os.fsencode(folder) + b"\n")
        watcher.stdin.flush()


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


def marked(mark: str) -> dict[int, int]:
    """Every running process whose environment carries ``mark``, as process id → start time."""
    found: dict[int, int] = {}
    wanted = mark.encode()
    prefix = MARK_VARIABLE.encode() + b"="
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes()  # another user's processes: PermissionError
        except OSError:
            continue
        for variable in environment.split(b"\0"):
            if variable.startswith(prefix) and wanted in variable[len(prefix):].split():
                stat = _stat(int(entry.name))
                if stat is not None and stat[0] != "Z":
                    found[int(entry.name)] = stat[1]
                break
    return found


def _told_folders(stream: BinaryIO) -> list[Path]:
    """The folders the eval told of (``_tell``) that the watcher may remove: DocPilot's own, in the temporary folder.

    Read once the eval is gone, without waiting: what it wrote is in the pipe already.
    """
    with contextlib.suppress(OSError, ValueError):
        os.set_blocking(stream.fileno(), False)
    data = b""
    with contextlib.suppress(OSError, ValueError, TypeError):
        while chunk := stream.read(65536):
            data += chunk
    temporary = Path(tempfile.gettempdir()).resolve()
    folders = [Path(os.fsdecode(line)) for line in data.splitlines() if line]
    return [f for f in folders if f.name.startswith("docpilot-") and f.resolve().parent == temporary]


def _alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == started and stat[0] != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _open_pidfd(pid: int) -> int | None:
    # A descriptor that becomes readable the moment the process exits (Linux 5.3 and later).
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _noted_until_gone(parent: int, started: int) -> dict[int, int]:
    """Note ``parent``'s descendants twice a second until it is gone; the last ones noted."""
    me = os.getpid()
    known: dict[int, int] = {}
    pidfd = _open_pidfd(parent)
    try:
        while _alive(parent, started):
            known = {pid: begun for pid, begun in descendants(parent).items() if pid != me}
            if pidfd is None:
                time.sleep(POLL_S)
            else:
                select.select([pidfd], [], [], POLL_S)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return known


def watch(parent: int, mark: str, told: BinaryIO | None = None) -> None:
    """Wait until ``parent`` is gone, then stop what it left running: its descendants and what carries ``mark``;
    then remove the temporary folders ``parent`` told of on ``told`` (its helpers')."""
    me = os.getpid()
    started = int(mark.rpartition(".")[2])
    left = _noted_until_gone(parent, started)
    folders = _told_folders(told) if told is not None else []
    signalled: set[tuple[int, int]] = set()
    deadline = time.monotonic() + GRACE_S
    while True:
        # Looked for again until none is left: a helper may still have been starting a
        # process of its own while the first ones were signalled.
        left.update(marked(mark))
        left = {pid: begun for pid, begun in left.items() if pid != me and _alive(pid, begun)}
        for pid, begun in left.items():
            if (pid, begun) not in signalled:
                _signal(pid, signal.SIGTERM)
                signalled.add((pid, begun))
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    for pid, begun in left.items():  # a helper killed just now may still be writing into its folder
        while _alive(pid, begun) and time.monotonic() < deadline + GRACE_S:
            time.sleep(0.05)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        watch(int(sys.argv[1]), sys.argv[2], sys.stdin.buffer)
