"""The eval flow: the core's stage wiring with every stage a Prefect task run, then the scorecard artifact.

The order of the stages is written once, in ``docpilot.run.wiring``; this module hands
it an executor whose calls are task runs (one per stage per shard) and publishes the
scorecard. ``run_eval`` runs one eval (the core's ``evaluated``) under the orchestrator
``docpilot.run.orchestrator`` chooses; an inline run never needs this module. A Dask
run (``flows.dask``) sends the shards out concurrently with the same wiring.
"""

from __future__ import annotations

import functools
from typing import Literal

from prefect import flow, tags
from prefect.context import TagsContext
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)
from prefect.utilities.annotations import quote

from docpilot.errors import OrchestratorError
from docpilot.run import stages
from docpilot.run.job import EvalJob
from docpilot.run.orchestrator import Choice, Orchestration, choose
from docpilot.progress import Progress
from docpilot.run.evaluation import evaluated
from docpilot.run.wiring import Executor, completed, run_stages, served
from docpilot.schema import Report
from tasks.artifacts import publish_scorecard, run_tags
from tasks.stages import TASKS, as_task_run, quoted

Orchestrator = Choice
Runner = Literal["local", "dask"]


def _send(stage, job, traces):
    if stage is stages.model:  # answering overlaps the next shard's ranking
        return TASKS[stage].submit(*quoted((job, traces)))
    return completed(as_task_run(stage, job, traces))


PREFECT = Executor(call=as_task_run, send=_send)
"""Every stage a task run in the flow's process; answering submitted, so shards overlap."""


@flow(name="docpilot-eval", validate_parameters=False)
def eval_flow(job: EvalJob, runner: Runner = "local", orchestration: Orchestration | None = None) -> quote:
    """Evaluate a golden set, one Prefect task run per stage per shard; publish the scorecard.

    ``runner="dask"`` sends the shards to the flow's Dask task runner (``flows.dask``).
    """
    # The run's tags mark the flow run. Its task runs go untagged: Prefect asks its API for
    # concurrency slots for the tags of every task run as it starts, a round trip per
    # stage and shard that the server, busy with the run's events, answers slowly.
    orchestration = orchestration or choose("prefect", runner=runner)
    with TagsContext(current_tags=set()):
        if runner == "dask":
            from flows.dask import DASK

            report, path = run_stages(job, DASK, orchestration)
        else:
            report, path = run_stages(job, PREFECT, orchestration)
        publish_scorecard(quote(report), path)  # quote: Prefect would walk every row
    # quote: Prefect would otherwise walk every row of the returned report (seconds at 10,000).
    return quote((report, path))


def run_eval(
    job: EvalJob, orchestrator: Orchestrator | Orchestration = "auto", *, runner: Runner = "local",
    dask_address: str | None = None, progress: Progress | None = None,
) -> tuple[Report, str]:
    """Run one eval under the chosen orchestrator; returns the report and its path.

    ``orchestrator`` is a choice (``auto`` picks as ``docpilot.run.orchestrator.choose``
    does) or an orchestration already chosen. ``runner="dask"`` runs the shards on the
    Dask scheduler at ``dask_address``, or on a local cluster of two worker processes;
    it always runs under Prefect. The run is the core's ``evaluated`` (the endpoint's
    probe, the local provider's server, the first turns sent early), with this module's
    flow as its orchestrator; an inline run is ``evaluated`` alone.
    """
    orchestration = orchestrator if isinstance(orchestrator, Orchestration) else choose(orchestrator, runner=runner)
    if runner == "dask" and orchestration.orchestrator == "inline":
        raise OrchestratorError(
            "--runner dask runs the shards as Prefect task runs, so it cannot run inline\n"
            "  fix: drop --orchestrator inline, or drop --runner dask"
        )
    run_flow = None if orchestration.orchestrator == "inline" else functools.partial(
        orchestrate, runner=runner, dask_address=dask_address)
    return evaluated(job, progress=progress, orchestration=orchestration, orchestrate=run_flow, runner=runner)


def orchestrate(job: EvalJob, orchestration: Orchestration, *, runner: Runner = "local",
                dask_address: str | None = None) -> tuple[Report, str]:
    """Run a ready job's stages as the eval flow (``evaluated``'s orchestrate function); the report and its path.

    The server runtime without a URL serves the same config on a free loopback port for the run.
    """
    with served(job) as job:
        return _run_flow(job, orchestration, runner, dask_address)


def _run_flow(job: EvalJob, orchestration: Orchestration, runner: Runner, dask_address: str | None):
    # A heartbeat thread would hold the process up to a second at exit; a run of a
    # CLI process does not need crash detection by heartbeat.
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        try:
            with tags(*run_tags(job, runner=runner)):
                if runner == "dask":
                    from flows.dask import run_on_dask

                    return _unquoted(run_on_dask(eval_flow, job, dask_address, orchestration))
                return _unquoted(eval_flow(job, orchestration=orchestration))
        except (RuntimeError, ValueError) as exc:
            if "Failed to reach API" in str(exc) or "No Prefect API URL" in str(exc):
                raise OrchestratorError(
                    f"cannot reach the Prefect API at {PREFECT_API_URL.value() or '(none configured)'}: {exc}\n"
                    "  fix: start it (`prefect server start`), correct PREFECT_API_URL, or unset it or pass "
                    "--orchestrator inline to run without Prefect"
                ) from None
            if "Prefect API" not in str(exc):
                raise
            raise OrchestratorError(
                "Prefect's temporary API server did not start in time "
                f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS={_startup_timeout()})\n"
                "  fix: start one with `prefect server start` and set PREFECT_API_URL="
                "http://127.0.0.1:4200/api, raise the timeout, or run with --orchestrator inline"
            ) from None


def _unquoted(result):
    return result.unquote() if isinstance(result, quote) else result


def _startup_timeout() -> int:
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    return PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
