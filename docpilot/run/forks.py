"""The variants of a run, each in a process of its own, forked once the job is built.

A variant's turns cost its process a few milliseconds of interpreter each (the HTTP
client, the stream, storing the turn, scoring the row), so three variants at 32 turns
in flight each kept one interpreter busy and took 1.39 times as long as one
(``benchmarks.variants``). Forked, each variant has an interpreter of its own, and the
docs, the index and the imports the parent loaded are the children's without loading
them again (the pages are shared until written).

The parent forks every child before it starts a thread, so no lock another thread held
is copied locked, then ranks the records the variants share (``run.shared_ranking``) and
tells each child, through a pipe, which records are ranked; a child's stages wait for
those of the shard they look up, as the threads of one process do. Each child sends,
through a pipe of its own, its progress and at its end its report (or its error),
pickled; the parent joins the reports as before.

- Ctrl-C (or SIGTERM) reaches the parent, which passes a SIGTERM to each child: each
  stops as a run of one does, with its answered turns stored. The children are in a
  process group of their own, so the terminal's Ctrl-C reaches them once, this way.
- A child dies with its parent (``processes.die_with_parent``), however the parent ends.
- The stage cache is one store on disk for every process; a child opens its own
  connection to it (``docpilot.cache`` reopens after a fork).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from docpilot.errors import DocpilotError
from docpilot.processes import MessagePipe, die_with_parent

_STOP_GRACE_S = 30.0
"""How long a stopped child may take to store what it has and end before it is killed."""


def can_fork() -> bool:
    """Whether this platform forks (Linux and the other Unixes; not Windows)."""
    return hasattr(os, "fork")


class RankingFeed:
    """A child's view of a ranking its parent does: which records are ranked, as the parent says.

    ``wait`` has ``SharedRanking.wait``'s meaning, so a child's stages wait the same way.
    """

    def __init__(self, pipe: MessagePipe) -> None:
        self._pipe = pipe
        self._ready: set[str] = set()
        self._finished = False
        self._error: BaseException | None = None
        self._condition = threading.Condition()
        threading.Thread(target=self._listen, name="docpilot-ranking-feed", daemon=True).start()

    def _listen(self) -> None:
        try:
            while True:
                kind, value = self._pipe.receive()
                with self._condition:
                    if kind == "ranked":
                        self._ready.update(value)
                    else:  # "finished", with the error that ended the ranking, if any
                        self._error, self._finished = value, True
                    self._condition.notify_all()
                if kind != "ranked":
                    return
        except (EOFError, OSError):
            with self._condition:
                self._error = self._error or RuntimeError("the process ranking the records ended early")
                self._finished = True
                self._condition.notify_all()

    def wait(self, traces: list, interrupt: threading.Event | None = None) -> None:
        """Return once every one of ``traces`` is ranked and stored; raise what stopped the ranking, if anything."""
        wanted = {t.record.id for t in traces}
        with self._condition:
            while not wanted <= self._ready and not self._finished:
                if interrupt is not None and interrupt.is_set():
                    return
                self._condition.wait(timeout=0.2)
            if wanted <= self._ready:
                return
        if self._error is not None:
            raise self._error


class VariantProcessError(DocpilotError):
    """A variant's process ended without a report or an error of its own (killed, out of memory)."""


@dataclass
class Child:
    """One variant's process, seen from the parent."""

    name: str
    pid: int
    events: MessagePipe
    ranking: MessagePipe | None
    result: Any = None
    """What the child's function returned (a variant's report and outcome values)."""
    error: BaseException | None = None
    stopped: bool = False
    """Asked to stop, because another variant failed or the run was interrupted."""
    cause: bool = False
    """The first variant that failed by itself: its error is the run's."""
    reader: threading.Thread | None = field(default=None, repr=False)


def fork_variant(name: str, run: Callable[[Any, RankingFeed | None], Any], *, shares_ranking: bool,
                 inherited: list[int]) -> Child:
    """Fork a child that calls ``run(progress_sink, feed)`` and sends what it returns back; the child, seen from here.

    ``inherited`` holds the parent's ends of the pipes of children forked before: the
    child closes them, so that each pipe ends when its own two processes are done with it.
    """
    events_read, events_write = os.pipe()
    ranking_read, ranking_write = os.pipe() if shares_ranking else (-1, -1)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            die_with_parent(parent)
            os.setpgid(0, 0)  # Ctrl-C at the terminal reaches the parent only, which passes it on
            for fd in (*inherited, events_read, ranking_write):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            feed = MessagePipe.from_fd(ranking_read, "r") if shares_ranking else None
            _child_main(run, MessagePipe.from_fd(events_write, "w"), feed)
        finally:
            os._exit(70)  # only reached if the child's own ending failed
    os.close(events_write)
    if shares_ranking:
        os.close(ranking_read)
    child = Child(name=name, pid=pid, events=MessagePipe.from_fd(events_read, "r"),
                  ranking=MessagePipe.from_fd(ranking_write, "w") if shares_ranking else None)
    inherited.extend(fd for fd in (events_read, ranking_write) if fd >= 0)
    return child


class _PipeSink:
    """A child's progress sink: its steps go to the parent, which shows them under the variant's name.

    Steps are sent at most every ``EVERY_S`` per stage, added up (a message per turn
    would cost the child and the parent a few thousand pickles and system calls), and
    what is left when the child ends (``flush``).
    """

    EVERY_S = 0.1

    def __init__(self, pipe: MessagePipe) -> None:
        self._pipe = pipe
        self._lock = threading.Lock()
        self._pending: dict[str, int] = {}
        self._sent_at = 0.0

    def start(self, stage: str, total: int) -> None:
        self.flush()
        self._pipe.send(("start", stage, total))

    def advance(self, stage: str, count: int = 1) -> None:
        with self._lock:
            self._pending[stage] = self._pending.get(stage, 0) + count
            due = time.monotonic() - self._sent_at >= self.EVERY_S
        if due:
            self.flush()

    def flush(self) -> None:
        """Send the steps not sent yet."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._sent_at = time.monotonic()
        for stage, count in pending.items():
            self._pipe.send(("advance", stage, count))

    def close(self) -> None:
        self.flush()


def _child_main(run: Callable[[Any, RankingFeed | None], Any], events: MessagePipe, ranking: MessagePipe | None) -> None:
    from docpilot import progress

    # Fresh standard streams: a thread of the parent (a progress bar's) may have held theirs.
    sys.stdout = open(1, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors, closefd=False,  # noqa: SIM115
                      buffering=1)
    sys.stderr = open(2, "w", encoding=sys.stderr.encoding, errors=sys.stderr.errors, closefd=False,  # noqa: SIM115
                      buffering=1)
    progress.install(None)
    signal.signal(signal.SIGTERM, _stop_here)
    signal.signal(signal.SIGINT, _stop_here)
    code = 0
    sink = _PipeSink(events)
    try:
        result = run(sink, RankingFeed(ranking) if ranking is not None else None)
        sink.flush()
        events.send(("done", result))
    except BaseException as error:  # noqa: BLE001 - every ending is the parent's to report
        code = 1
        with contextlib.suppress(BaseException):
            events.send(("error", portable(error)))
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _stop_here(signum: int, frame: Any) -> None:
    """The parent asked this variant to stop: it stops as a run of one does, its answered turns stored."""
    from docpilot.run.context import stop_all

    stop_all()
    raise KeyboardInterrupt


def portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling whole, else an error of the same kind and words that does."""
    with contextlib.suppress(Exception):
        pickle.loads(pickle.dumps(error))
        return error
    if isinstance(error, KeyboardInterrupt):
        return KeyboardInterrupt()
    if isinstance(error, DocpilotError):
        copy = DocpilotError(str(error))
        copy.exit_code = error.exit_code
        return copy
    return RuntimeError(f"{type(error).__name__}: {error}")


def collect(children: list[Child], forward: Callable[[Child, str, str, int], None]) -> None:
    """Read every child's messages until each has sent its report or error (or died); forward progress.

    A child's error, or its death, stops the others: the run has failed, and their
    answered turns are stored.
    """

    def read(child: Child) -> None:
        try:
            while True:
                message = child.events.receive()
                if message[0] in ("start", "advance"):
                    forward(child, *message)
                elif message[0] == "done":
                    child.result = message[1]
                elif message[0] == "error":
                    child.error = message[1]
                    failed(child)
        except (EOFError, OSError, pickle.UnpicklingError):
            if child.result is None and child.error is None:  # it died
                failed(child)

    lock = threading.Lock()

    def failed(child: Child) -> None:
        with lock:
            if child.stopped:
                return  # it stopped because it was asked to
            if not any(c.cause for c in children):
                child.cause = True
            stop([other for other in children if other is not child])

    for child in children:
        child.reader = threading.Thread(target=read, args=(child,), name=f"docpilot-variant-{child.name}", daemon=True)
        child.reader.start()


def stop(children: list[Child]) -> None:
    """Ask every child still running to stop (SIGTERM: it stores what it has, as a run of one does)."""
    for child in children:
        if not child.stopped:
            child.stopped = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)


def reap(children: list[Child], grace_s: float = _STOP_GRACE_S) -> None:
    """Wait for each child's messages and its end; a child still there ``grace_s`` after being stopped is killed."""
    for child in children:
        assert child.reader is not None
        child.reader.join(grace_s if child.stopped else None)
        if child.reader.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.reader.join()
        _, status = os.waitpid(child.pid, 0)
        child.events.close()
        if child.result is None and child.error is None:
            code = os.waitstatus_to_exitcode(status)
            how = f"was killed by signal {-code}" if code < 0 else f"ended with exit code {code}"
            child.error = VariantProcessError(
                f"the process of variant {child.name!r} {how} before sending its report; the turns every "
                "variant answered are stored: run the same command again to resume")


@contextlib.contextmanager
def children_stopped_on_exit(children: list[Child]) -> Iterator[None]:
    """On any error or interrupt in the parent, stop and reap every child before it goes further."""
    try:
        yield
    except BaseException:
        stop(children)
        with contextlib.suppress(BaseException):
            reap(children)
        raise
