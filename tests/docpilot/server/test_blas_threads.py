"""The server's worker processes split the cores for numpy's matrix products too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

# Forks like run_server, then reports what each process's BLAS library will use.
PROBE = """
import json, os, sys
import numpy  # the BLAS library is loaded, as in a server holding its index
from threadpoolctl import threadpool_info
from docpilot.server.serving import share_blas_threads
chosen = share_blas_threads(int(sys.argv[1]))
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, json.dumps([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]).encode())
    os._exit(0)
os.waitpid(pid, 0)
child = json.loads(os.read(read, 1000))
parent = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"chosen": chosen, "parent": parent, "child": child}))
"""


def _probe(workers: int, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.endswith(("_NUM_THREADS", "_MAXIMUM_THREADS"))}
    done = subprocess.run([sys.executable, "-c", PROBE, str(workers)], env={**clean, **env},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to share")
def test_one_worker_per_core_gets_one_blas_thread_each_and_the_fork_keeps_it():
    cores = os.cpu_count() or 1
    shared = _probe(cores)
    assert shared == {"chosen": 1, "parent": [1], "child": [1]}
    alone = _probe(1)
    assert alone == {"chosen": cores, "parent": [cores], "child": [cores]}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to share")
def test_threads_the_user_set_are_left_as_they_are():
    # Serving alone, the process would keep every core; the user's one thread stands.
    assert _probe(1, OPENBLAS_NUM_THREADS="1") == {"chosen": None, "parent": [1], "child": [1]}
