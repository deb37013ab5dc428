"""What the HTML report tests share: one headless Chromium per test module."""

from __future__ import annotations

import pytest

from tests.support.browser import Browser, find_chromium


@pytest.fixture(scope="module")
def browser():
    """A running headless Chromium; the browser tests skip where none is installed."""
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set DOCPILOT_CHROMIUM)")
    with Browser(executable) as running:
        yield running
