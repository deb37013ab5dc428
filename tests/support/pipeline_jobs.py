"""Eval jobs over the small pipeline corpus (tests/data/pipeline), and how to compare their reports."""

from __future__ import annotations

from pathlib import Path

from docpilot.config.model import Config
from docpilot.run.job import EvalJob
from docpilot.schema import Report

PIPELINE = Path(__file__).resolve().parent.parent / "data" / "pipeline"
TIMING_ROW_FIELDS = {"latency_ms", "first_token_ms", "first_thought_ms", "stages_ms"}
TIMING_METRICS = ("latency_", "first_token_", "stage_")


def pipeline_job(folder: Path, model: dict | None = None, **changes) -> EvalJob:
    """A job over the six-record pipeline golden set, in two shards, caching and reporting under ``folder``;
    ``model`` sets the config's model section (``{"repeat": 3}``)."""
    config = Config(
        corpus={"docs": str(PIPELINE / "docs")},
        golden=str(PIPELINE / "golden.yaml"),
        cache_dir=str(folder / "cache"),
        reports_dir=str(folder / "reports"),
        shard_size=4,  # two shards for six records
        **({"model": model} if model else {}),
    )
    return EvalJob(config=config, golden=config.golden, **changes)


def comparable(report: Report) -> tuple[list[dict], dict]:
    """Rows without timings and without ``cached``, and the summary without timing metrics."""
    rows = [r.model_dump(exclude=TIMING_ROW_FIELDS | {"cached"}) for r in report.rows]
    summary = {k: v for k, v in report.summary.items() if not k.startswith(TIMING_METRICS)}
    return rows, summary
