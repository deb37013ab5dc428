"""The one retry policy: Retry-After obeyed up to its cap, else a doubling backoff with jitter."""

from __future__ import annotations

from datetime import UTC, datetime

from docpilot.net.retry import RETRY_AFTER_CAP_S, RetryPolicy, parse_retry_after


def test_a_retry_after_is_obeyed_up_to_the_cap() -> None:
    policy = RetryPolicy()
    assert policy.wait_s(0, parse_retry_after("2")) == 2.0
    assert policy.wait_s(0, parse_retry_after("3600")) == RETRY_AFTER_CAP_S
    assert RetryPolicy(retry_after_cap_s=float("inf")).wait_s(0, 3600.0) == 3600.0


def test_without_a_retry_after_the_backoff_doubles_to_its_cap_with_jitter() -> None:
    steady = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=3.0, jitter=False)
    assert [steady.wait_s(a, parse_retry_after("soon")) for a in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    jittered = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=3.0)
    for attempt in range(5):
        wait = jittered.wait_s(attempt)
        assert steady.wait_s(attempt) / 2 <= wait <= steady.wait_s(attempt)


def test_the_policy_gives_up_after_its_retries() -> None:
    policy = RetryPolicy(retries=2)
    assert [policy.gives_up(a) for a in range(4)] == [False, False, True, True]
    assert RetryPolicy(retries=0).gives_up(0)


def test_an_http_date_in_the_past_waits_nothing() -> None:
    now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert parse_retry_after("Wed, 01 Jan 2025 11:59:00 GMT", now=now) == 0.0
