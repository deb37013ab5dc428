"""A Prefect server of its own for one run, when no Prefect API is configured.

Not a flow and not a task, but Prefect's side of the line: it sits with the tasks, which
report to it, so that ``flows/`` only wires and the core never needs it.

Work that leaves the flow's process (Dask workers) needs a Prefect API every process
can reach: with none configured, each worker would start a temporary server of its
own, which is slow and loses the runs. ``prefect_api`` starts ``prefect server start``
on a free loopback port with a throw-away ``PREFECT_HOME``, waits until it answers,
points this process and its children at it, and stops it (by its process id) when
the run is over; if this process dies first, so does the server
(``docpilot.processes``). With ``PREFECT_API_URL`` set it starts nothing.

Creating Prefect's database costs more than half of a start (about 8 of 15 CPU
seconds), so the first server keeps a copy of its new, empty database in the
temporary folder, one per Prefect version, and later servers start from a copy of it.
The copy sits in a folder of the user's own (``docpilot-prefect-db-<uid>``, mode 0700):
a database another user could have put in the shared temporary folder is never a
server's start, and a link put there is never written through.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import prefect
from prefect.settings import PREFECT_API_URL, temporary_settings

from docpilot.errors import OrchestratorError
from docpilot.processes import reserved_port, scratch_folder, start_child, stop_child, wait_until_ready

_HOST = "127.0.0.1"

STARTUP_TIMEOUT_S = 180.0
"""How long to wait for the server to answer. A new database takes about 10 s on an idle
two-core machine, and several times that on a busy one."""
_STOP_GRACE_S = 10.0
_LOG_TAIL_LINES = 5

# Settings of the process that would point the server elsewhere: its API address, and
# a database of the user's that a throw-away server must not touch.
_INHERITED_NOT = {"PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"}

_RECORDING = ("PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED", "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED")
"""The services that turn a run's events into task runs in the UI, and keep its events."""

# The server's own settings: an API and nothing else, quiet, and nothing sent anywhere.
_SERVER_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_UI_ENABLED": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


class _ServerExited(OrchestratorError):
    """The server process ended before it answered."""


@dataclass
class PrefectServer:
    """A running ``prefect server start`` process that this process started."""

    process: subprocess.Popen
    url: str
    """The API's URL, such as ``http://127.0.0.1:41234/api``."""
    home: Path
    """Its ``PREFECT_HOME``: database and log, removed when it stops."""

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def stop(self) -> None:
        """Stop the server by its process id, wait for it to exit, and remove its home."""
        stop_child(self.process, grace_s=_STOP_GRACE_S)
        shutil.rmtree(self.home, ignore_errors=True)


def start_prefect_server(*, services: bool = False, timeout_s: float = STARTUP_TIMEOUT_S) -> PrefectServer:
    """Start ``prefect server start`` on a free loopback port and return once it is healthy.

    ``services`` also runs the server's background services (the scheduler among
    them); a server that only records one run needs none.
    """
    try:
        return _start(services, timeout_s, seed=True)
    except _ServerExited:
        template = _template()
        if template is None or not template.exists():
            raise
        # A kept database that a server cannot start from is dropped, and made anew.
        template.unlink(missing_ok=True)
        return _start(services, timeout_s, seed=False)


def _start(services: bool, timeout_s: float, *, seed: bool) -> PrefectServer:
    home = Path(scratch_folder("docpilot-prefect-server-"))  # removed by the eval's watcher should the eval be killed
    database = home / "prefect.db"
    seeded = seed and _seed_database(database)
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_NOT}
    env.update(_SERVER_ENV, PREFECT_HOME=str(home),
               PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{database}")
    if services:
        # This process's quiet defaults (``tasks``) switch off recording task runs and
        # storing events, for a temporary server stopped mid-run; a server started with
        # its services is one to look at afterwards, so it records them as a plain
        # `prefect server start` does.
        env.update({name: "true" for name in _RECORDING})
    log = home / "server.log"
    with reserved_port(_HOST) as port:  # held until the server listens on it
        command = [sys.executable, "-m", "prefect", "server", "start", "--host", _HOST, "--port", str(port)]
        if not services:
            command.append("--no-services")
        with log.open("wb") as sink:
            # A session of its own: Ctrl-C in the terminal reaches DocPilot, which then stops
            # the server itself, rather than both at once. Should DocPilot be killed outright,
            # the server gets SIGTERM from the kernel (it is one process: uvicorn in-process).
            process = start_child(
                command, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = PrefectServer(process=process, url=f"http://{_HOST}:{port}/api", home=home)
        try:
            _wait_healthy(server, timeout_s, log)
        except BaseException:
            server.stop()
            raise
    if not seeded:
        _keep_template(database)
    return server


@contextlib.contextmanager
def prefect_api() -> Iterator[str]:
    """The configured Prefect API's URL, or that of a server started for the duration of the block."""
    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    server = start_prefect_server()
    try:
        with using_api(server.url):
            try:
                yield server.url
            finally:
                # Logs and events still queued would be sent after the server stopped, and
                # print connection errors at exit: send them while it still listens.
                drain_to_api(timeout_s=5.0)
    finally:
        server.stop()


@contextlib.contextmanager
def using_api(url: str) -> Iterator[None]:
    """Point this process (its Prefect settings) and the processes it starts (their environment) at ``url``."""
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous


def drain_to_api(timeout_s: float | None = None) -> bool:
    """Send the logs and events still queued for the Prefect API; whether all of them went within ``timeout_s``.

    Prefect does the same as the interpreter stops. The command line does it itself so
    that, once the run's record is on the server, the process can exit without the
    interpreter's teardown; a server that is about to stop gets it before it stops.
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    sent = True
    for worker in (APILogWorker, EventsWorker):  # logs first: a log may emit an event, never the other way
        _, pending = worker.drain_all(timeout=timeout_s)
        sent = sent and not pending
    return sent


def _template() -> Path | None:
    """Where the kept empty database is: in a folder only this user can write; None when there is no such folder."""
    folder = Path(tempfile.gettempdir()) / f"docpilot-prefect-db-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None  # a link, another user's folder, or one others may write in: its files could be anyone's
    return folder / f"{prefect.__version__}.sqlite"


def _seed_database(database: Path) -> bool:
    """Start ``database`` as a copy of the kept empty database, when there is one and it is this user's own file."""
    template = _template()
    try:
        info = os.lstat(template) if template is not None else None
        if info is None or not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return False
        shutil.copyfile(template, database)
    except OSError:
        return False
    return True


def _keep_template(database: Path) -> None:
    """Keep a copy of a server's new database, taken before any run was recorded in it."""
    template = _template()
    if template is None or template.exists():
        return
    partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
    try:
        # SQLite's backup copies a consistent snapshot of a database that is open elsewhere.
        with (
            contextlib.closing(sqlite3.connect(database)) as source,
            contextlib.closing(sqlite3.connect(partial)) as copy,
        ):
            source.backup(copy)
        os.replace(partial, template)
    except (OSError, sqlite3.Error):
        partial.unlink(missing_ok=True)  # only a lost speed-up: the next server creates its own


def _wait_healthy(server: PrefectServer, timeout_s: float, log: Path) -> None:
    with httpx.Client(timeout=2.0) as client:

        def healthy() -> bool | None:
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"{server.url}/health").status_code == 200:
                    return True
            return None

        wait_until_ready(
            server.process, healthy, timeout_s=timeout_s, interval_s=0.2,
            exited=lambda status: _ServerExited(
                f"the Prefect server for this run exited with status {status} "
                f"before it answered:\n{_tail(log)}\n"
                "  fix: start one with `prefect server start` and set PREFECT_API_URL to its /api URL"
            ),
            timed_out=lambda: OrchestratorError(
                f"the Prefect server for this run did not answer within {timeout_s:.0f} s\n"
                "  fix: start one with `prefect server start`, wait until it answers, and set PREFECT_API_URL "
                "to its /api URL"
            ),
        )


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "  (no server log)"
    return "\n".join("  | " + line for line in lines[-_LOG_TAIL_LINES:])
