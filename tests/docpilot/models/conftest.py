"""What the model client tests share: the async backend, and a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import OpenAIScript, serve_openai


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, OpenAIScript]]:
    """One scripted server per test module, its script reset by each module's own fixtures."""
    script = OpenAIScript()
    with serve_openai(script) as base_url:
        yield base_url, script
