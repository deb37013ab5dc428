"""What a run cost: the tokens the model reported and their price, split by where they came from.

    prompt_tokens       = Σ row.usage["prompt_tokens"]       over rows that reported usage
    completion_tokens   = Σ row.usage["completion_tokens"]   over rows that reported usage
    cost_usd            = Σ row.cost_usd                     over rows with a cost
    <each>_cached       = the same sum over the rows whose turn was reused from the cache

What this run spent is the total less the cached part: a cached turn was paid for by
the run that first computed it. A sum over no rows is None: a service that reports no
usage (llama.cpp's server does not in its streams) has no token count, not a count of 0.

truncated_answers counts the answers that stopped at ``max_tokens``: they are kept and
scored, and this says how many of them the budget cut short.

    truncated_answers   = Σ [row.truncated]                  over rows that say whether they were cut

A row that cannot say (``truncated`` None: a target that gives no finish reason) is
left out, and a run with no row that can say has no count: None, not 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from docpilot.metrics.population import Population

from docpilot.schema import Row


def _reported(row: Row) -> bool:
    return bool(row.usage)


def _priced(row: Row) -> bool:
    return row.cost_usd is not None


def _from_cache(row: Row) -> bool:
    return "model" in row.cached


REPORTED = Population("rows whose service reported token usage", _reported)
REPORTED_CACHED = Population(
    "rows reused from the cache whose service reported token usage", lambda row: _reported(row) and _from_cache(row)
)
PRICED = Population("rows with a cost at the configured prices", _priced)
PRICED_CACHED = Population(
    "rows reused from the cache with a cost at the configured prices", lambda row: _priced(row) and _from_cache(row)
)
TRUNCATION_KNOWN = Population(
    "rows whose assistant says whether the answer was cut short", lambda row: row.truncated is not None
)


def prompt_tokens(row: Row) -> int:
    """The prompt tokens the service reported for the row's turn (0 when it gave none)."""
    return row.usage.get("prompt_tokens", 0)


def completion_tokens(row: Row) -> int:
    """The completion tokens the service reported for the row's turn (0 when it gave none)."""
    return row.usage.get("completion_tokens", 0)


def cost_usd(row: Row) -> float:
    """The row's cost in US dollars at the prices the run was configured with."""
    if row.cost_usd is None:
        raise ValueError(f"row {row.id!r} has no cost_usd; select rows with PRICED")
    return row.cost_usd


def dollars(values: Sequence[float]) -> float | None:
    """Sum of costs (``math.fsum``, so many small costs add up exactly); None when there are none."""
    if not values:
        return None
    return math.fsum(values)


def truncated(row: Row) -> int:
    """1 when the row's answer stopped at ``max_tokens``, else 0."""
    if row.truncated is None:
        raise ValueError(f"row {row.id!r} cannot say whether it was truncated; select rows with TRUNCATION_KNOWN")
    return int(row.truncated)
