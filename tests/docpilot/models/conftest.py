"""What the model client tests share: the async backend, and the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.support.openai_server import OpenAIScript


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(_openai_session) -> tuple[str, OpenAIScript]:
    """The test process's scripted server (tests/conftest.py), its script reset by each module's own fixtures."""
    return _openai_session
