"""One eval run's description, and the records it covers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from docpilot.config import Config
from docpilot.golden import load_golden
from docpilot.schema import GoldenRecord


class EvalJob(BaseModel):
    """Everything an eval run needs to know, small enough to pass to an orchestrator."""

    model_config = ConfigDict(extra="forbid")

    config: Config
    """The effective configuration."""
    golden: str
    """Path of the golden set."""
    split: Literal["dev", "test", "all"] = "all"
    """Which records run."""
    gate_only: bool = False
    """Retrieval only: no model is called."""
    use_cache: bool = True
    """Reuse cached stage results."""
    out: str | None = None
    """Where to write the report; None for the reports folder."""


def job_records(job: EvalJob) -> list[GoldenRecord]:
    """The job's records, in file order, filtered to its split."""
    records = load_golden(job.golden)
    if job.split == "all":
        return records
    return [r for r in records if r.split == job.split]


def shards(items: Sequence, size: int) -> Iterator[list]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
