"""Prefect flows that wire the stage tasks together."""

import docpilot.tasks  # noqa: F401  -- quiets Prefect before it is first imported
