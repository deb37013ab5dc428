"""The report task: score every row, decide the verdict, write the report file."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.reports.changes import page_fingerprints
from docpilot.reports.report import assemble_report, write_report
from docpilot.run.job import EvalJob
from docpilot.run.workspace import open_workspace
from docpilot.schema import Report, Row


@task(name="report", cache_policy=NONE)
def report(job: EvalJob, rows: list[Row], wall_ms: float, orchestrator: str) -> tuple[Report, str]:
    """Summarise the rows, check the gates and write the report atomically."""
    corpus = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint).corpus
    built = assemble_report(
        job, rows, wall_ms=wall_ms, orchestrator=orchestrator, corpus_fingerprint=corpus.fingerprint,
        page_fingerprints=page_fingerprints(corpus),
    )
    path = write_report(built, job.out or f"{job.config.reports_dir}/{built.run_id}.json")
    return built, str(path)
