"""Where a hosted model's or embedder's API key comes from: the environment, never the config."""

from __future__ import annotations

import os
from collections.abc import Mapping

KEY_VARIABLES: tuple[str, ...] = ("DOCPILOT_API_KEY", "OPENAI_API_KEY")
"""Environment variables read for the key, in order."""


def api_key_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The API key from ``DOCPILOT_API_KEY``, else ``OPENAI_API_KEY``; None when neither is set."""
    for name in KEY_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    return None
