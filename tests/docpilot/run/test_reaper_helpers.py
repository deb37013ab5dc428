"""kill -9 of a process that started a Prefect server or a local Dask cluster leaves neither running.

Real processes and real signals: a parent starts the helper the way a run does, the test
kills the parent with SIGKILL, and then looks for every process started under the
test's mark (``tests.support.orphans``).
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support.orphans import left_in, marked_env, survivors, wait_for_descendant

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")]

_PREFECT_PARENT = """
import time
from docpilot.tasks.prefect_server import start_prefect_server
start_prefect_server()
time.sleep(600)
"""

_WATCHED_PREFECT_PARENT = """
import time
from docpilot.run.reaper import watch_children
from docpilot.tasks.prefect_server import start_prefect_server
watch_children()  # as an eval on Dask does before its server starts
start_prefect_server()
time.sleep(600)
"""

_DASK_PARENT = """
import time
from distributed import LocalCluster
from docpilot.flows.dask import local_cluster_options
cluster = LocalCluster(**local_cluster_options())
time.sleep(600)
"""


# Regression: kill -9 of a process whose Prefect server (tasks.prefect_server) was starting
# left `prefect server start` running: it had no parent-death signal.
def test_kill_9_as_the_prefect_server_starts_leaves_no_server():
    mark, env = marked_env()
    run = subprocess.Popen([sys.executable, "-c", _PREFECT_PARENT], cwd=ROOT, env=env)
    try:
        wait_for_descendant(run.pid, lambda command: "prefect server start" in command)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert survivors(mark) == []
    finally:
        run.kill()
        run.wait()


def test_kill_9_as_a_local_cluster_starts_its_workers_leaves_no_worker():
    # Dask's worker processes watch a pipe from the process that started them and exit
    # when it closes; killed as they start, they go as soon as that watch begins.
    mark, env = marked_env()
    run = subprocess.Popen([sys.executable, "-c", _DASK_PARENT], cwd=ROOT, env=env)
    try:
        wait_for_descendant(run.pid, lambda command: "multiprocessing" in command and "spawn_main" in command)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert survivors(mark) == []
    finally:
        run.kill()
        run.wait()


# Regression: the server's temporary home (its database and log) stayed behind in /tmp.
def test_kill_9_of_a_watched_process_removes_its_prefect_servers_home(tmp_path):
    temporary = tmp_path / "tmp"  # the parent's temporary folder, where the server's home goes
    temporary.mkdir()
    mark, env = marked_env(TMPDIR=str(temporary))
    run = subprocess.Popen([sys.executable, "-c", _WATCHED_PREFECT_PARENT], cwd=ROOT, env=env)
    try:
        wait_for_descendant(run.pid, lambda command: "prefect server start" in command)
        assert len(list(temporary.glob("docpilot-prefect-server-*"))) == 1
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert survivors(mark) == []
        assert left_in(temporary, "docpilot-prefect-server-*") == []
    finally:
        run.kill()
        run.wait()
