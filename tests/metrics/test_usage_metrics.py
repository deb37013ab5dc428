"""Tokens, cost and truncated answers (metrics/usage.py), on hand-computed rows."""

from __future__ import annotations

from docpilot.metrics.summary import summarize

from docpilot.config.model import ModelConfig
from docpilot.models.prices import turn_cost_usd


def _rows(make_row):
    return [
        make_row("p1", answer="a", usage={"prompt_tokens": 1000, "completion_tokens": 50}, cost_usd=0.0025),
        make_row("p2", answer="b", usage={"prompt_tokens": 400, "completion_tokens": 10}, cost_usd=0.001,
                 cached=["retrieve", "model"], truncated=True),
        make_row("p3", answer="c"),  # a service that reported no usage
    ]


def test_tokens_and_cost_are_totals_with_the_cached_part_apart(make_row) -> None:
    summary, counts = summarize(_rows(make_row))
    assert summary["prompt_tokens"] == 1400 and summary["completion_tokens"] == 60
    assert summary["cost_usd"] == 0.0035
    assert summary["prompt_tokens_cached"] == 400 and summary["completion_tokens_cached"] == 10
    assert summary["cost_usd_cached"] == 0.001
    assert counts["prompt_tokens"] == 2 and counts["cost_usd_cached"] == 1


def test_a_run_without_reported_usage_has_no_token_count_not_zero(make_row) -> None:
    summary, _ = summarize([make_row("p1", answer="a")])
    for name in ("prompt_tokens", "completion_tokens", "cost_usd", "prompt_tokens_cached", "cost_usd_cached"):
        assert summary[name] is None, name


def test_truncated_answers_are_counted(make_row) -> None:
    summary, _ = summarize(_rows(make_row))
    assert summary["truncated_answers"] == 1


def test_a_turn_costs_its_tokens_at_the_prices_per_million() -> None:
    prices = ModelConfig(price_prompt_per_million=2.5, price_completion_per_million=10.0)
    assert turn_cost_usd({"prompt_tokens": 1000, "completion_tokens": 50}, prices) == 0.003
    assert turn_cost_usd({"prompt_tokens": 1000}, ModelConfig(price_completion_per_million=10.0)) == 0.0
    assert turn_cost_usd({}, prices) is None
    assert turn_cost_usd({"prompt_tokens": 1000}, ModelConfig()) is None


# Regression: a run against a target, which gives no finish reason, read truncated_answers 0.
def test_truncated_answers_is_null_when_no_row_can_say(make_row) -> None:
    rows = [make_row("p1", answer="a", truncated=None), make_row("p2", answer="", error="timeout", truncated=None)]
    summary, counts = summarize(rows)
    assert summary["truncated_answers"] is None and counts["truncated_answers"] == 0


def test_rows_that_cannot_say_are_left_out_of_the_truncated_count(make_row) -> None:
    rows = [*_rows(make_row), make_row("t1", answer="d", truncated=None)]
    summary, counts = summarize(rows)
    assert summary["truncated_answers"] == 1 and counts["truncated_answers"] == 3
