"""How the ``docpilot`` process ends: the exit handlers and the output, then no interpreter teardown."""

from __future__ import annotations

import os
import sys


def end_process(code: int, *, quick: str | None, interrupted: bool = False) -> None:
    """End the command with ``code``; the ``docpilot`` process itself skips the interpreter's teardown.

    Everything the run writes is written and closed by now. What is left is the
    interpreter freeing every object of the run one by one: a quarter of a second
    after an inline run of 1,000 records and more than half a second after a Prefect
    run (measured), which the user would wait for and nothing needs. The exit handlers
    still run and the output is flushed first. ``quick`` is ``inline``, or ``prefect``
    for a run that reported to a configured Prefect API: its queued events and logs
    are sent first, as Prefect would at exit, so the run's record is complete on the
    server. A temporary Prefect server, a Dask cluster, or a command run inside another
    program (a test, a benchmark, a profiler) gets the ordinary exit.

    An ``interrupted`` run (Ctrl-C, SIGTERM) ends the same way whatever threads still
    run: the turns it answered are stored, and the interpreter's own teardown, waiting
    on threads that Prefect started and the signal cut short, could turn the exit code
    into a death by signal (seen once in several runs under load).
    """
    if quick and _is_this_process() and (interrupted or _threads_quiet()):
        if quick == "prefect":
            from tasks.prefect_server import drain_to_api

            if not drain_to_api(timeout_s=5.0 if interrupted else None) and not interrupted:
                sys.exit(code)
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _is_this_process() -> bool:
    # A profiler, a debugger or coverage wraps the command and writes what it gathered
    # after the command returns: the process is theirs.
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return False
    # `python -m docpilot` runs docpilot.__main__; the installed `docpilot` script runs a file of that name.
    entry = sys.modules.get("__main__")
    spec = getattr(entry, "__spec__", None)
    if spec is not None:
        return spec.name == "docpilot.__main__"
    return os.path.basename(sys.argv[0] or "") in ("docpilot", "docpilot.exe")


def _threads_quiet() -> bool:
    """Whether only daemon threads run besides this one: nothing that the interpreter would wait for at exit."""
    import threading

    main_thread = threading.main_thread()
    return all(t.daemon or t is main_thread or not t.is_alive() for t in threading.enumerate())
