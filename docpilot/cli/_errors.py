"""How errors leave the command line: a one-line message on stderr and an exit code, never a traceback.

A DocpilotError already says where and what to do, so it is printed as it is, after
`error: `, and the command exits with the error's code (2 for bad input). An
operating-system error (a full disk, a read-only folder, no permission) is no bug
either: it is printed with the file it concerns and the fix, and exits 2. Anything
else is a bug: it is reported in one line and exits 3. Set `DOCPILOT_DEBUG=1` to see
the traceback as well.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, overload

import click

from docpilot.errors import DISK_FULL, DISK_FULL_FIX, DocpilotError, fills_disk
from docpilot.redact import redact
from docpilot.reports.terminal import clean

INTERNAL_ERROR_EXIT = 3
"""Exit code of a failure DocPilot did not expect (a bug, not bad input)."""

_F = TypeVar("_F", bound=Callable[..., Any])

DEBUG_VARIABLE = "DOCPILOT_DEBUG"
"""Environment variable that, when set to 1, prints tracebacks as well."""


def debug_enabled() -> bool:
    """Whether tracebacks were asked for through ``DOCPILOT_DEBUG``."""
    return os.environ.get(DEBUG_VARIABLE, "").strip().lower() not in ("", "0", "false", "no", "off")


_CLICK_EXITS = (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit)


class _ErrorHandler(contextlib.ContextDecorator):
    """The context manager behind ``handle_errors``; also a decorator, through ContextDecorator."""

    def __enter__(self) -> _ErrorHandler:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, _CLICK_EXITS):
            return False  # success, Ctrl-C, sys.exit and click's own usage errors pass through
        if debug_enabled():
            traceback.print_exception(exc)
        if isinstance(exc, DocpilotError):
            # Messages quote ids and values from files, and URLs that may carry credentials.
            click.echo(clean(redact(f"error: {exc}", shapes=False)), err=True)
            raise SystemExit(exc.exit_code) from None
        if isinstance(exc, OSError) and (exc.errno is not None or fills_disk(exc)):
            click.echo(clean(f"error: {_os_error(exc)}"), err=True)
            raise SystemExit(2) from None
        if fills_disk(exc):  # SQLite reports a full disk as its own error, not as an OSError
            click.echo(clean(f"error: {DISK_FULL} ({type(exc).__name__}: {exc}); fix: {DISK_FULL_FIX}"), err=True)
            raise SystemExit(2) from None
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        hint = "" if debug_enabled() else f" (set {DEBUG_VARIABLE}=1 to see the traceback)"
        click.echo(clean(f"internal error: {type(exc).__name__}{': ' + detail if detail else ''}{hint}"), err=True)
        raise SystemExit(INTERNAL_ERROR_EXIT) from None


def _os_error(exc: OSError) -> str:
    """An operating-system error (a full disk, a read-only folder, no permission) in one line with its fix.

    A short write (numpy's "29808 requested and 16352 written") carries no errno and no
    file name; it is a full disk all the same.
    """
    from docpilot.reports.output import os_fix

    where = f"{exc.filename}: " if exc.filename else ""
    what = f"{DISK_FULL} ({' '.join(str(exc).split())})" if fills_disk(exc) else exc.strerror or exc
    return f"{where}{what}; fix: {os_fix(exc)}"


@overload
def handle_errors(func: _F) -> _F: ...


@overload
def handle_errors(func: None = None) -> _ErrorHandler: ...


def handle_errors(func: _F | None = None) -> _F | _ErrorHandler:
    """Turn errors into `error: …` on stderr and an exit code, with no traceback.

    Use it as ``@handle_errors``, ``@handle_errors()`` or ``with handle_errors():``.
    A DocpilotError exits with its own code (2 for bad input); any other exception is
    a bug and exits 3. Click's usage errors and exits pass through untouched.
    """
    handler = _ErrorHandler()
    return handler if func is None else handler(func)


INTERRUPTED_EXIT = 130
"""Exit code of a run stopped by Ctrl-C or SIGTERM."""

_held = 0  # how many ``signals_held`` blocks the main thread is in
_stop_asked = False  # a signal asked this process to stop (signals are the process's, not a run's)


@contextlib.contextmanager
def signals_held():
    """Let Ctrl-C and SIGTERM wait until the block ends, then stop the run as they would have.

    For imports such as Prefect's: a KeyboardInterrupt raised inside one is caught by the
    library's own start-up (its plugin loader prints it with a traceback) and the run goes
    on into a flow that then fails loudly. Held, the signal marks the run as stopping,
    the import completes, and the interrupt is raised here, where the run stops in its one
    message.
    """
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1
    if _stop_asked:
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts_resume():
    """Turn Ctrl-C and SIGTERM into a one-line message: finished work is cached, re-run to resume.

    Model results are stored as each one completes, so nothing finished is lost; the
    message tells the user so instead of printing a traceback. The block is given the
    run's stop flag (a ``threading.Event``): the signal sets it, so that the run stops
    even if a library it passes through (Prefect, while its flow run starts) swallows
    the KeyboardInterrupt.
    """
    import threading

    from docpilot.run.lane import Interrupted

    stop = threading.Event()

    signalled = False

    def _terminate(signum, frame):
        nonlocal signalled
        global _stop_asked
        signalled = _stop_asked = True
        stop.set()  # the run stops, even if the KeyboardInterrupt below is swallowed
        if _held:  # inside code that must not be cut (an import): it ends first, then stops the run
            return
        raise KeyboardInterrupt

    def _stop() -> None:
        click.echo(
            "interrupted: every finished record is in the cache; run the same command again to resume",
            err=True,
        )
        sys.exit(INTERRUPTED_EXIT)

    def _unraisable(unraisable) -> None:
        # A signal that lands in code Python cannot raise from (a weakref's callback, such as
        # the import system's module locks, or a __del__) has its KeyboardInterrupt printed
        # with a traceback and dropped; the stop mark ends the run instead, so say nothing.
        if signalled and unraisable.exc_type is KeyboardInterrupt:
            return
        previous_hook(unraisable)

    previous = {signum: signal.signal(signum, _terminate) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        yield stop
    except (KeyboardInterrupt, Interrupted):
        _stop()
    except Exception:
        # Raised inside code that turns every exception into its own (pydantic, serializing
        # a turn: "PydanticSerializationError: ... KeyboardInterrupt"), the interrupt comes
        # back as an error. It is still the interrupt.
        if not signalled:
            raise
        _stop()
    finally:
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)
