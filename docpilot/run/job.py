"""One eval run's description, and the records it covers."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from docpilot.config.golden import load_golden, load_probes
from docpilot.config.model import Config
from docpilot.schema import GoldenRecord


class EvalJob(BaseModel):
    """Everything an eval run needs to know, small enough to pass to an orchestrator."""

    model_config = ConfigDict(extra="forbid")

    config: Config
    """The effective configuration."""
    golden: str
    """Path of the record file: the golden set, or the attack probes when ``set`` is adversarial."""
    set: Literal["golden", "adversarial"] = "golden"
    """Which record set runs: questions with known answers, or attack probes."""
    split: Literal["dev", "test", "all"] = "all"
    """Which records run."""
    gate_only: bool = False
    """Retrieval only: no model is called."""
    use_cache: bool = True
    """Read and write cached stage results; False computes everything and stores nothing."""
    refresh: list[Literal["retrieve", "model"]] = Field(default_factory=list)
    """Stages to compute afresh (and store again) even where a cached result exists."""
    allow_errors: bool = False
    """Errored records are counted but do not fail the run."""
    runtime: Literal["local", "server"] = "local"
    """Where the assistant runs: in this process, or behind `docpilot serve` over HTTP."""
    url: str | None = None
    """The server's base URL for the server runtime; None starts a local one for the run."""
    out: str | None = None
    """Where to write the report; None for the reports folder."""
    corpus_fingerprint: str | None = None
    """The corpus the run started with: every stage, here or on a worker, must rank that corpus."""


_LOADED: dict[tuple[str, str, str], list] = {}


def read_records(path: str, kind: str = "golden") -> list:
    """A golden set's records (or, for ``adversarial``, a probe file's probes), parsed once
    per process for the same file content."""
    try:
        key = (kind, str(Path(path).resolve()), hashlib.sha256(Path(path).read_bytes()).hexdigest())
    except OSError:
        key = None
    load = load_probes if kind == "adversarial" else load_golden
    if key is None:
        return load(path)  # says what is wrong with the path, in the user's terms
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load(path)
    return _LOADED[key]


def job_records(job: EvalJob) -> list[GoldenRecord]:
    """The job's records, in file order, filtered to its split."""
    records = read_records(job.golden, job.set)
    if job.split == "all":
        return records
    return [r for r in records if r.split == job.split]


def shards(items: Sequence, size: int, *, first: int | None = None) -> Iterator[list]:
    """Consecutive slices of at most ``size`` items; the first one holds at most ``first``."""
    start = 0
    if first is not None and first < min(size, len(items)):
        yield list(items[:first])
        start = first
    for start in range(start, len(items), size):
        yield list(items[start : start + size])
