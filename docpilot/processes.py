"""Child processes that end with the process that started them, even when it is killed outright.

DocPilot starts helpers of its own: ``docpilot serve`` and its workers, llama.cpp's
server, a Prefect server. Each is started through ``start_child`` (or, for a process
forked without ``exec``, calls ``die_with_parent``), which asks Linux to signal the
child the moment its parent is gone (``PR_SET_PDEATHSIG``), however the parent ended:
``kill -9`` and the out-of-memory killer leave it no chance to clean up, and a helper
would otherwise run on, holding a port, a core or memory.

Two details make that hold at any moment:

- The kernel ties the signal to the *thread* that forked the child, not to the
  process: a child started from a short-lived thread would be signalled when that
  thread ended. So children are started from the main thread, or handed to one
  lasting thread of this module that does nothing else.
- A parent can die between the fork and the request; the child then checks that
  its parent is still the one that started it, and exits if not.

Elsewhere than on Linux the signal is not available, and children end only when
stopped (``stop_child``).

A helper that serves on a port gets one the OS chose and that this process holds
bound until the helper listens on it (``reserved_port``): no other program picking a
free port meanwhile can take it. ``wait_until_ready`` is the one wait for a starting
helper: it polls what the helper offers as a sign of life, and fails at once when
the helper exits. Processes that libraries start (Dask's workers, Prefect's
own temporary server) are the library's: Dask's workers watch a pipe to their parent,
and ``docpilot.run.reaper`` covers the rest for an eval, and removes the temporary
folders made for its helpers (``scratch_folder``).

Between an eval and the processes it starts for itself, messages go through a
``MessagePipe``: length-prefixed pickles.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import queue
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")

_SCRATCH_LISTENERS: list[Callable[[str], None]] = []


def scratch_folder(prefix: str) -> str:
    """A new temporary folder for a helper (a Prefect server's home, a local server's config and log).

    Whoever listens (``docpilot.run.reaper``'s watcher, for an eval) is told of it before
    the helper starts, and removes it should this process be killed before it could.
    """
    folder = tempfile.mkdtemp(prefix=prefix)
    for listener in list(_SCRATCH_LISTENERS):
        with contextlib.suppress(OSError):  # a watcher gone already only costs the clean-up
            listener(folder)
    return folder


def on_scratch_folder(listener: Callable[[str], None]) -> None:
    """Have ``listener`` told of every folder ``scratch_folder`` makes from now on."""
    _SCRATCH_LISTENERS.append(listener)


_PR_SET_PDEATHSIG = 1


def _find_prctl() -> Callable[..., int] | None:
    # Looked up once, here: a child between fork and exec must not load libraries (a lock
    # another thread held at the fork would never be released in it).
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _find_prctl()


def die_with_parent(parent: int, death_signal: int = signal.SIGTERM) -> None:
    """In a child, at once after the fork: receive ``death_signal`` when ``parent`` (the starter) dies.

    Exits at once when ``parent`` is already gone. A no-op where Linux's parent-death
    signal is missing.
    """
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect: nobody wants this child


def start_child(
    command: Sequence[str], *, death_signal: int = signal.SIGTERM, **popen: Any
) -> subprocess.Popen:
    """Start ``command`` (``subprocess.Popen`` options in ``popen``) as a child that gets ``death_signal``
    when this process dies.

    SIGTERM (the default) lets the child stop what it started in turn; SIGKILL is for a
    child that has nothing to tidy.
    """
    if "preexec_fn" in popen:
        raise TypeError("start_child sets preexec_fn itself")
    parent = os.getpid()

    def launch() -> subprocess.Popen:
        return subprocess.Popen(list(command), preexec_fn=lambda: die_with_parent(parent, death_signal), **popen)

    if _PRCTL is None:
        return subprocess.Popen(list(command), **popen)
    if threading.current_thread() is threading.main_thread():
        return launch()
    return _launcher().run(launch)


def stop_child(process: subprocess.Popen, *, grace_s: float = 10.0) -> None:
    """Stop a child process the run started: SIGTERM, then SIGKILL if it is still there after ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def reserved_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port the OS chose on ``host``, held bound (not listening) for the block: start the helper in it.

    The hold uses ``SO_REUSEADDR``, which lets a server that sets it too (uvicorn, and so
    llama.cpp's and Prefect's servers) listen on the port, while every other ``bind``,
    including another program's pick of a free port, is refused or steered elsewhere.
    Leave the block once the helper listens.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((host, 0))
        yield held.getsockname()[1]


def wait_until_ready(
    process: subprocess.Popen,
    ready: Callable[[], T | None],
    *,
    timeout_s: float,
    exited: Callable[[int], BaseException],
    timed_out: Callable[[], BaseException],
    interval_s: float = 0.05,
) -> T:
    """Poll ``ready()`` until it gives something other than None, and return that.

    A helper announces readiness no other way than by answering (or printing a line), so
    this polls. It raises ``exited(status)`` as soon as the process ends, and
    ``timed_out()`` after ``timeout_s``; ``ready`` itself should not raise for a helper
    that is merely not listening yet.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise exited(process.returncode)
        found = ready()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise timed_out()
        time.sleep(interval_s)


class _Launcher:
    """One daemon thread that starts children for other threads: it lasts as long as the process."""

    def __init__(self) -> None:
        self._asks: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen], Future]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="docpilot-children", daemon=True).start()

    def run(self, launch: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        done: Future[subprocess.Popen] = Future()
        self._asks.put((launch, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            launch, done = self._asks.get()
            try:
                done.set_result(launch())
            except BaseException as error:  # handed back to the thread that asked
                done.set_exception(error)


_LAUNCHER: _Launcher | None = None
_LAUNCHER_LOCK = threading.Lock()


def _launcher() -> _Launcher:
    global _LAUNCHER
    with _LAUNCHER_LOCK:
        if _LAUNCHER is None:
            _LAUNCHER = _Launcher()
        return _LAUNCHER


def _forget_launcher() -> None:
    # A forked child has none of its parent's threads: it starts its own launcher when it needs one.
    global _LAUNCHER, _LAUNCHER_LOCK
    _LAUNCHER, _LAUNCHER_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_launcher)


class MessagePipe:
    """One end of a pipe between DocPilot's own processes, carrying length-prefixed pickles.

    Used between an eval and the processes it starts for itself (a variant's, the one
    that sends its spans): both ends run this code, so a message is any picklable value.
    A lock keeps the messages of several threads whole. ``encode`` lets a caller pickle a
    message at once and ``write`` it later, from another thread.
    """

    _LENGTH = struct.Struct(">Q")

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._lock = threading.Lock()

    @classmethod
    def from_fd(cls, fd: int, mode: str) -> MessagePipe:
        """The pipe end ``fd`` (``"r"`` or ``"w"``), unbuffered; closing the pipe closes ``fd``."""
        return cls(os.fdopen(fd, mode + "b", buffering=0))

    @staticmethod
    def encode(message: Any) -> bytes:
        """A message as it travels: its length, then its pickle."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        return MessagePipe._LENGTH.pack(len(data)) + data

    def send(self, message: Any) -> None:
        self.write(self.encode(message))

    def write(self, encoded: bytes) -> None:
        """Send a message ``encode`` made."""
        view = memoryview(encoded)
        with self._lock:
            while view:
                written = self._file.write(view)
                view = view[written if written is not None else len(view):]
            self._file.flush()

    def receive(self) -> Any:
        """The next message; EOFError when the other end is closed."""
        header = self._read(self._LENGTH.size)
        return pickle.loads(self._read(self._LENGTH.unpack(header)[0]))

    def _read(self, size: int) -> bytes:
        parts, left = [], size
        while left:
            part = self._file.read(left)
            if not part:
                raise EOFError
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()

