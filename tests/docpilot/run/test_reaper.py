"""A killed eval leaves nothing running: the watcher stops its helpers, real processes and real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docpilot.run.reaper import descendants
from tests.conftest import DATA, ROOT
from tests.support.orphans import marked_env, survivors

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the watcher reads /proc")]

_PARENT = """
import subprocess, sys, time
from docpilot.run.reaper import watch_children
watch_children()
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(helper.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def test_a_helper_of_a_process_killed_with_sigkill_is_stopped():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        helper = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while helper not in descendants(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # two of the watcher's looks: it has noted the helper
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _gone(helper)
    finally:
        parent.kill()


def _server_below(pid: int) -> int | None:
    for child in descendants(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):  # the child ended between the listing and the read
            continue
        if b"prefect.server.api.server:create_app" in command or b"prefect\x00server\x00start" in command:
            return child
    return None


# Regression: kill -9 of a Prefect-run eval left its temporary Prefect server running.
# Regression: killed just as it started that server, the eval left it running even with the
# watcher, which stopped only the processes it had seen at its last look, half a second before.
def test_kill_9_of_a_prefect_eval_leaves_no_prefect_server(tmp_path):
    mark, env = marked_env()
    pipeline = DATA / "pipeline"
    command = [sys.executable, "-m", "docpilot", "eval", "--docs", str(pipeline / "docs"),
               "--golden", str(pipeline / "golden.yaml"), "--orchestrator", "prefect",
               "--out", str(tmp_path / "r.json")]  # fmt: skip
    run = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while (server := _server_below(run.pid)) is None:
            assert run.poll() is None and time.monotonic() < deadline, "the eval ended before its server was seen"
            time.sleep(0.005)
        run.send_signal(signal.SIGKILL)  # at once: the watcher may not have looked since the server started
        run.wait(10)
        assert survivors(mark) == [], f"the temporary Prefect server {server} or another helper is still running"
    finally:
        run.kill()
