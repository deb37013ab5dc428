"""Serving the app: listening sockets, uvicorn with the connection limits, and one worker process per core.

The extractive answer is CPU-bound Python, and one interpreter runs Python on one
core at a time however many questions it holds. ``run_server`` therefore forks
worker processes after the docs and the model are loaded (so they share that
memory), each running its own event loop on its own ``SO_REUSEPORT`` socket; the
kernel spreads new connections over them. A question is answered by the worker
whose socket took its connection, and the server's limits are split over the
workers: each takes its share of ``--max-concurrency``, of the queue and of the
connection cap, so the totals are what the options say. With more than one worker
the first process answers nothing itself: it supervises them, starting again any
that ends, and stops them on SIGTERM or Ctrl-C; the kernel stops them should it be
killed outright (``docpilot.server.supervisor``). The cores are split for numpy's
matrix products too (``share_blas_threads``). Every serving process stops by
draining its answers under way (``docpilot.server.draining``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import uvicorn
from starlette.applications import Starlette

from docpilot.errors import ConfigError
from docpilot.net.shares import split
from docpilot.server.draining import CUT_GRACE_S, DEFAULT_GRACE_S, DrainingServer
from docpilot.server.guards import AccessLogRedactor
from docpilot.server.protocol import Limits, guarded_protocol
from docpilot.server.roster import Roster
from docpilot.server.supervisor import supervise


def default_workers(max_concurrency: int) -> int:
    """One worker per core, never more than the questions allowed at once."""
    return max(1, min(os.cpu_count() or 1, max_concurrency))


_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def share_blas_threads(workers: int) -> int | None:
    """Let the BLAS library behind numpy use the workers' share of the cores; the threads each may use.

    OpenBLAS starts a thread per core in every process. A question embedded by MiniLM
    (``hybrid``) runs a few matrix products, each spread over every core, so with one
    worker per core the workers' BLAS threads outnumber the cores and contend for them,
    which cuts throughput and lengthens the tail (``benchmarks.server_load --retriever
    hybrid`` measures it). A process that serves alone keeps every core. None when the
    user set the threads in the environment: theirs stand.
    """
    if any(os.environ.get(name) for name in _THREAD_VARIABLES):
        return None
    import numpy  # noqa: F401  (loads the BLAS library, if the docs and the index did not yet)
    from threadpoolctl import threadpool_limits

    threads = max(1, (os.cpu_count() or 1) // workers)
    threadpool_limits(limits=threads, user_api="blas")
    return threads


def share(total: int, workers: int, index: int) -> int:
    """Worker ``index``'s part of ``total`` when it is split over ``workers`` (the parts add up to it)."""
    return split(total, workers)[index]


def bind(host: str, port: int, *, count: int = 1) -> list[socket.socket]:
    """``count`` listening TCP sockets on one host:port (port 0: any free port); ConfigError when it cannot bind."""
    sockets: list[socket.socket] = []
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        family, kind, proto, _, address = found[0]
        for _ in range(count):
            # Naming the protocol lets asyncio turn Nagle off; otherwise small events wait on delayed ACKs.
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            address = sock.getsockname()  # the others take the port the first one got
            sock.listen(2048)  # connections made before uvicorn accepts wait in the backlog
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pass another --port (0 picks a free one), or stop the process that holds this one",
        ) from None
    return sockets


def url_of(sock: socket.socket) -> str:
    """The base URL a bound socket serves."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _config(
    app: Starlette, limits: Limits, *, access_log: bool, log_config: dict | None, shutdown_s: float
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),  # type: ignore[arg-type]
        access_log=access_log,
        log_config=log_config,
        lifespan="on",
        server_header=False,
        # Longer than clients keep idle connections (4 to 5 s), so the server never closes
        # one just as a client reuses it.
        timeout_keep_alive=30,
        # What uvicorn's own shutdown waits for responses still being sent: after a drain, none.
        timeout_graceful_shutdown=shutdown_s,
    )


_DEFAULT_LIMITS = Limits()

_SPARE_FILES = 256
"""Descriptors kept free of connections: the docs, the cache, the log and the workers need some."""


def _connection_cap(connections: int) -> int:
    """Lift the soft open-file limit toward the hard one; the cap that then stays below it.

    A cap above the file limit would let ``accept`` fail first: enough half-open
    connections would then stop the server before the cap refuses any of them.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + _SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return connections
    return max(1, min(connections, soft - _SPARE_FILES))


def run_server(
    app: Starlette,
    sockets: list[socket.socket],
    *,
    access_log: bool = False,
    limits: Limits = _DEFAULT_LIMITS,
    grace_s: float = DEFAULT_GRACE_S,
) -> None:
    """Serve ``app`` until told to stop (Ctrl-C or SIGTERM): one worker per socket from ``bind``.

    One socket: this process serves. More: this process supervises a forked worker per
    socket (``docpilot.server.supervisor``), and every worker's figures meet in
    ``app.state.roster``. Told to stop, every worker drains its answers under way for
    at most ``grace_s`` (``docpilot.server.draining``).
    """
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    # The server's own lines (failures by request id) go where uvicorn's go, in its format.
    log_config["loggers"]["docpilot"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    log_config.setdefault("filters", {})["redact"] = {"()": AccessLogRedactor}
    log_config["handlers"]["access"]["filters"] = ["redact"]
    cap = _connection_cap(limits.max_connections)
    if len(sockets) > 1 and threading.active_count() > 1:
        # Forking a process that runs threads (a local embedding model's, say) can leave a
        # worker holding a lock no thread will release; one process is slower but safe.
        print("docpilot serve: threads are running, so one worker process answers", file=sys.stderr)
        for extra in sockets[1:]:
            extra.close()
        sockets = sockets[:1]
    workers = len(sockets)
    share_blas_threads(workers)  # before the fork: the workers inherit the setting
    slots = app.state.slots
    total_slots, total_queue = slots.limit, slots.queue_depth
    roster = app.state.roster = Roster(workers)
    worker_limits = replace(limits, max_connections=max(1, cap // workers))

    def serve(index: int) -> None:
        mine = sockets[index]
        if workers > 1:
            for sock in sockets:
                if sock is not mine:
                    sock.close()  # in the worker only: the supervisor keeps them for restarts
        slots.limit = share(total_slots, workers, index)
        slots.queue_depth = share(total_queue, workers, index)
        app.state.worker = index
        config = _config(app, worker_limits, access_log=access_log, log_config=log_config, shutdown_s=CUT_GRACE_S)
        DrainingServer(
            config,
            app.state.drain,
            grace_s=grace_s,
            idle=lambda: slots.in_flight == 0 and slots.waiting == 0,
            under_way=lambda: slots.in_flight + slots.waiting,
            # A supervised worker drains on the supervisor's SIGTERM; the supervisor logs the drain.
            signals=(signal.SIGTERM,) if workers > 1 else (signal.SIGTERM, signal.SIGINT),
            announce=workers == 1,
            report=lambda drain: roster.drained(index, drain.finished, drain.cut),
        ).run(sockets=[mine])

    if workers == 1:
        roster.starting(0)
        serve(0)
        return
    supervise(serve, workers, roster, grace_s=grace_s, closed=lambda index: sockets[index].close())


@contextlib.contextmanager
def serve_in_thread(
    app: Starlette, *, host: str = "127.0.0.1", port: int = 0, limits: Limits = _DEFAULT_LIMITS
) -> Iterator[str]:
    """Serve ``app`` from a background thread; yields its base URL and stops it on exit."""
    (sock,) = bind(host, port)
    server = uvicorn.Server(_config(app, limits, access_log=False, log_config=None, shutdown_s=3))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="docpilot-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {url_of(sock)} did not start")
            time.sleep(0.01)
        yield url_of(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
