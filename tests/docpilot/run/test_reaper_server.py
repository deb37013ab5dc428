"""kill -9 of `docpilot eval --runtime server` leaves no `docpilot serve` and no worker of it running.

Real processes and real signals: the eval starts its own server, the test kills the eval
with SIGKILL at a chosen moment, and then looks for every process started under the
test's mark (``tests.support.orphans``), wherever it has been re-parented to.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT
from tests.support.orphans import left_in, marked_env, survivors, wait_for_children, wait_for_descendant

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")]


def _is_serve(command: str) -> bool:
    return "main(prog_name='docpilot')" in command and " serve " in command


# Regression: kill -9 of `eval --runtime server` just as it started its server left
# `docpilot serve` and its workers running: the watcher had not seen them yet, and the
# served child had no parent-death signal of its own.
@pytest.mark.parametrize("moment", ["as-the-server-starts", "once-its-workers-are-up"])
def test_kill_9_of_an_eval_in_the_server_runtime_leaves_no_server(tmp_path: Path, moment: str):
    temporary = tmp_path / "tmp"  # the eval's temporary folder, where the server's config and log go
    temporary.mkdir()
    mark, env = marked_env(TMPDIR=str(temporary))
    pipeline = DATA / "pipeline"
    command = [sys.executable, "-m", "docpilot", "eval", "--runtime", "server", "--docs", str(pipeline / "docs"),
               "--golden", str(pipeline / "golden.yaml"), "--out", str(tmp_path / "r.json")]  # fmt: skip
    run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        served = wait_for_descendant(run.pid, _is_serve)
        if moment == "once-its-workers-are-up":
            wait_for_children(served, 1)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert survivors(mark) == []
        assert left_in(temporary, "docpilot-serve-*") == []  # nor its folder (regression: it stayed in /tmp)
    finally:
        run.kill()
        run.wait()
