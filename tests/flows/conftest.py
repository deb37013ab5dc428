"""A real Prefect server for the flow tests that need one, started once per test process.

Schedules, artifacts and Dask workers need a Prefect API that outlives a flow run and
that other processes reach. The server is started by the same helper DocPilot uses
(``tasks.prefect_server``) and stopped by its process id when the session ends. Starting it
changes nothing else: a test points Prefect at it through the ``prefect_api`` fixture,
for that module only, so other tests keep running without an API.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def prefect_server():
    """A running ``prefect server start`` on a free loopback port, with a throw-away home."""
    from docpilot.tasks.prefect_server import start_prefect_server

    server = start_prefect_server()
    yield server
    server.stop()
    assert server.process.poll() is not None, f"the Prefect server {server.pid} outlived the session"


@pytest.fixture(scope="module")
def prefect_api(prefect_server):
    """Prefect pointed at the shared server (settings and environment), for one test module."""
    from docpilot.tasks.prefect_server import using_api

    with using_api(prefect_server.url):
        yield prefect_server.url
