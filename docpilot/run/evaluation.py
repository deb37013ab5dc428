"""One eval from start to report: ``evaluate(job) -> Report``, for the CLI, the Prefect flow, Dask and Python callers.

What a run needs besides its stages is done here, once, whoever calls:

- the model endpoint is probed, and must answer before the first record is sent (the
  ``local`` provider's llama.cpp server is started then, and stopped at the end);
- the run's first shards are ranked and their turns sent while the probe is out and
  before an orchestrator is up (``wiring.leading``);
- helpers the run starts (a temporary Prefect server, a Dask cluster, a local
  ``docpilot serve``) are watched, so they die with this process however it ends;
- the run's state lives in its own ``RunContext``, so evals on several threads of one
  process keep apart.

The stages run inline unless the caller hands in an ``orchestrate`` function (the
Prefect flow of ``flows.eval`` does): the core never imports an orchestrator. How the
process ends (the CLI's quick exit) and what Ctrl-C prints are the CLI's business.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from docpilot.errors import OrchestratorError
from docpilot.progress import Progress, current
from docpilot.run.context import RunContext, opened
from docpilot.run.job import EvalJob
from docpilot.run.orchestrator import Orchestration, choose, configured_api

if TYPE_CHECKING:
    from docpilot.models.probe import Ready
    from docpilot.schema import Report

Orchestrate = Callable[[EvalJob, Orchestration], "tuple[Report, str]"]
"""Runs the stages of a ready job under an orchestrator; the report and its path (``flows.eval``)."""


def evaluate(
    job: EvalJob,
    *,
    progress: Progress | None = None,
    orchestration: Orchestration | None = None,
    orchestrate: Orchestrate | None = None,
    runner: Literal["local", "dask"] = "local",
    ready: Ready | None = None,
) -> Report:
    """Run the eval ``job`` describes and write its report; the report (``evaluated`` gives its path too).

    ``progress`` counts the run's records (by default the calling thread's, see
    ``docpilot.progress``); ``ready`` is a probe the caller already started
    (``models.probe.ready_endpoint``), so that it overlapped building the job.
    """
    return evaluated(job, progress=progress, orchestration=orchestration, orchestrate=orchestrate, runner=runner,
                     ready=ready)[0]


def evaluated(
    job: EvalJob,
    *,
    progress: Progress | None = None,
    orchestration: Orchestration | None = None,
    orchestrate: Orchestrate | None = None,
    runner: Literal["local", "dask"] = "local",
    ready: Ready | None = None,
    meanwhile: Callable[[], object] | None = None,
    prepare: Callable[[RunContext], object] | None = None,
) -> tuple[Report, str]:
    """``evaluate``, with the report's path; ``meanwhile`` runs once the first turns are out (a caller's imports),
    ``prepare`` with the run's context as soon as it is open (a run of several variants: ``run.variants``)."""
    if orchestration is None:
        orchestration = choose("inline" if orchestrate is None else "auto", runner=runner)
    if orchestration.orchestrator != "inline" and orchestrate is None:
        raise OrchestratorError(f"a run under Prefect ({orchestration.reason}) needs its flow; "
                                "fix: run it through flows.eval.run_eval, or choose the inline orchestrator")
    with contextlib.ExitStack() as stack:
        if ready is None and calls_model(job):
            from docpilot.models.probe import ready_endpoint

            ready = stack.enter_context(ready_endpoint(job.config))
        if _starts_helpers(job, orchestration, runner):
            from docpilot.run.reaper import watch_children

            watch_children()  # Prefect's temporary server, a Dask cluster or a local server: gone if this is killed
        context = stack.enter_context(opened(job, progress or current()))
        if prepare is not None:
            prepare(context)
        if runner != "local":
            from docpilot.run.wiring import checked_unless_all_stored

            return (orchestrate or _inline)(checked_unless_all_stored(job, ready), orchestration)
        from docpilot.run.wiring import leading

        # The first shards are ranked while the endpoint's probe is out, and their turns go
        # out before the orchestrator, when there is one, is imported.
        with leading(job, ready) as job:
            if meanwhile is not None:
                meanwhile()
            from docpilot.reports.report import code_fingerprint

            code_fingerprint()  # the report needs it; worked out while the model answers, not after
            return (orchestrate or _inline)(job, orchestration)


def calls_model(job: EvalJob) -> bool:
    """Whether this process calls the model: not for ``gate_only``, nor when a running server is measured."""
    return not job.gate_only and not (job.runtime == "server" and job.url)


def _starts_helpers(job: EvalJob, orchestration: Orchestration, runner: str) -> bool:
    # A run that reports to a configured Prefect API starts no helper, and would pay for a
    # second Python process (the watcher) for nothing.
    temporary_server = orchestration.orchestrator == "prefect" and not configured_api()
    return temporary_server or runner == "dask" or (job.runtime == "server" and not job.url)


def _inline(job: EvalJob, orchestration: Orchestration) -> tuple[Report, str]:
    from docpilot.run.wiring import run_inline

    return run_inline(job, orchestration)
