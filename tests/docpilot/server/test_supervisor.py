"""Supervised workers: a real `docpilot serve --workers 2`, a worker killed with kill -9, and `/healthz` meanwhile."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from docpilot.server.roster import Roster, describe_exit
from tests.docpilot.cli.test_serve_cli import _children, _start

pytestmark = pytest.mark.slow

QUESTION = {"question": "How do I install Acme?", "stream": False}


def _until(client: httpx.Client, url: str, wanted: Callable[[dict], bool], timeout_s: float = 20.0) -> dict:
    """The first ``/healthz`` report that satisfies ``wanted``, asked over the client's kept-alive connection."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = client.get(f"{url}/healthz").json()
        if wanted(health):
            return health
        assert time.monotonic() < deadline, health
        time.sleep(0.02)


# Regression: a worker that died was never started again; it took its share of the slots
# with it, and /healthz, answered by a survivor, still showed the whole capacity.
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_a_worker_killed_with_kill_9_is_logged_and_started_again_and_healthz_shows_the_drop(tmp_path):
    process, url, log = _start(tmp_path, "--workers", "2", "--max-concurrency", "4")
    try:
        with httpx.Client(timeout=10) as client:  # one kept-alive connection: always the same worker
            health = _until(client, url, lambda h: h["total"]["workers_up"] == 2)
            assert health["status"] == "ok" and health["total"]["capacity"] == 4
            assert sorted(w["pid"] for w in health["workers"]) == sorted(_children(process.pid))
            other = next(w for w in health["workers"] if w["index"] != health["worker"])
            # The first process forks a new worker within milliseconds; held stopped, it
            # leaves the test the moment between the death and the restart to look at.
            os.kill(process.pid, signal.SIGSTOP)
            try:
                os.kill(other["pid"], signal.SIGKILL)
                health = _until(client, url, lambda h: h["total"]["workers_up"] == 1)
            finally:
                os.kill(process.pid, signal.SIGCONT)
            assert health["status"] == "degraded"
            assert health["total"]["capacity"] == 2  # what is left: the share of the worker still up
            assert health["max_concurrency"] == 4  # what was asked for
            dropped = health["workers"][other["index"]]
            assert dropped["state"] == "down" and dropped["capacity"] == 0 and dropped["in_flight"] == 0
            health = _until(client, url, lambda h: h["total"]["workers_up"] == 2)
        back = health["workers"][other["index"]]
        assert back["restarts"] == 1 and back["pid"] != other["pid"] and back["last_exit"] == "killed by SIGKILL"
        assert health["status"] == "ok" and health["total"]["capacity"] == 4 and health["total"]["restarts"] == 1
        line = f"docpilot serve: worker {other['index']} (pid {other['pid']}) killed by SIGKILL; starting it again"
        assert line in log.read_text()
        assert sorted(_children(process.pid)) == sorted(w["pid"] for w in health["workers"])
        # New connections are spread over both sockets again, the restarted worker's too.
        with httpx.Client(timeout=30) as client:
            statuses = [client.post(f"{url}/v1/ask", json=QUESTION, headers={"Connection": "close"}).status_code
                        for _ in range(20)]  # fmt: skip
        assert statuses == [200] * 20
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
    assert code == 0 and "Traceback" not in log.read_text()


def test_a_single_process_server_reports_itself_as_its_one_worker():
    roster = Roster(1)

    class Figures:
        limit, in_flight, turned_away, waiting = 8, 3, 1, 2

    roster.starting(0)
    roster.up(0, Figures())
    (worker,), total = roster.report()
    assert worker.state == "up" and worker.pid == os.getpid() and worker.capacity == 8 and worker.in_flight == 3
    assert total.capacity == 8 and total.workers_up == total.workers == 1 and worker.last_exit is None


def test_exits_are_described_by_how_the_process_ended():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    assert describe_exit(status) == "exited with status 7"
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert describe_exit(status) == "killed by SIGKILL"


def test_a_worker_whose_process_is_gone_is_down_before_anyone_notices():
    roster = Roster(2)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # ended and reaped, and nobody told the roster

    class Figures:
        limit, in_flight, turned_away, waiting = 4, 1, 0, 0

    roster.starting(0)
    roster.up(0, Figures())
    roster.starting(1)
    roster.forked(1, pid)
    workers, total = roster.report()
    assert [w.state for w in workers] == ["up", "down"] and total.capacity == 4 and total.workers_up == 1
