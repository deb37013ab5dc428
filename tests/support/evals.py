"""An eval the way the command line runs one: planned from the options, then ``evaluate(job, executor)``."""

from __future__ import annotations

from docpilot.flows.plan import Options, plan

from docpilot.run.evaluation import evaluate
from docpilot.run.job import EvalJob
from docpilot.schema import Report


def run_eval(job: EvalJob, orchestrator: str = "auto", *, runner: str = "local", dask_address: str | None = None,
             **given) -> Report:
    """Plan the run (``flows.plan``: every usage error raised there) and evaluate ``job`` where it says."""
    options = Options(orchestrator=orchestrator, runner=runner, dask_address=dask_address,
                      runtime=job.runtime if job.config.target is None else None, gate_only=job.gate_only)
    return evaluate(job, plan(job.config, options).executor, **given)
