"""What a turn cost: its reported token usage at the prices configured per million tokens."""

from __future__ import annotations

from collections.abc import Mapping

from docpilot.config.model import ModelConfig


def turn_cost_usd(usage: Mapping[str, int], settings: ModelConfig | None) -> float | None:
    """US dollars for one turn's usage; None without prices, or when the service reported no usage.

        cost = prompt_tokens · price_prompt / 10⁶ + completion_tokens · price_completion / 10⁶

    A price left empty counts as 0 as long as the other is set, so a service that bills
    only its output can be priced.
    """
    if settings is None or not usage:
        return None
    prompt_price, completion_price = settings.price_prompt_per_million, settings.price_completion_per_million
    if prompt_price is None and completion_price is None:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None and completion is None:
        return None
    return ((prompt or 0) * (prompt_price or 0.0) + (completion or 0) * (completion_price or 0.0)) / 1_000_000
