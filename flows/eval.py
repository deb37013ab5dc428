"""The eval flow: every shard through retrieve → prime → model → render → score, then the report.

``run_stages`` is the wiring, written once for both orchestrators: under Prefect each
call is a task run (one per stage per shard); inline, the same task functions are
called directly with no server. The results are the same either way. A Dask run
(``flows.dask``) sends the shards out concurrently with the same tasks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from prefect import flow, tags
from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
from prefect.utilities.annotations import quote

from docpilot import progress
from docpilot.errors import OrchestratorError
from docpilot.job import EvalJob, job_records, shards
from docpilot.pipeline import start_traces
from docpilot.schema import Report
from tasks import report as report_task
from tasks import stages
from tasks.artifacts import publish_scorecard, run_tags

Orchestrator = Literal["auto", "prefect", "inline"]
Runner = Literal["local", "dask"]
Call = Callable[..., Any]


def run_stages(job: EvalJob, call: Call, orchestrator: str) -> tuple[Report, str]:
    """Run every stage over every shard through ``call``, then score and write the report."""
    start = time.perf_counter()
    records = job_records(job)
    for stage in ("retrieve",) if job.gate_only else ("retrieve", "model"):
        progress.start(stage, len(records))
    rows = []
    for shard in shards(records, job.config.shard_size):
        if job.runtime == "server":
            traces = call(stages.remote, job, start_traces(shard))
            traces = call(stages.render, job, traces)
        else:
            traces = call(stages.retrieve, job, start_traces(shard))
            if not job.gate_only:
                for stage in (stages.prime, stages.model, stages.render):
                    traces = call(stage, job, traces)
        rows.extend(call(stages.score, job, traces))
    wall_ms = (time.perf_counter() - start) * 1000
    return call(report_task.report, job, rows, wall_ms, orchestrator)


def _inline(task, *args):
    return task.fn(*args)


def _as_task_run(task, *args):
    # Prefect walks task arguments looking for futures; quote() spares it the lists.
    return task(*(quote(a) if isinstance(a, list) else a for a in args))


@flow(name="docpilot-eval", validate_parameters=False)
def eval_flow(job: EvalJob, runner: Runner = "local") -> quote:
    """Evaluate a golden set, one Prefect task run per stage per shard; publish the scorecard.

    ``runner="dask"`` sends the shards to the flow's Dask task runner (``flows.dask``).
    """
    if runner == "dask":
        from flows.dask import run_distributed

        report, path = run_distributed(job)
    else:
        report, path = run_stages(job, _as_task_run, "prefect")
    publish_scorecard(quote(report), path)  # quote: Prefect would walk every row
    # quote: Prefect would otherwise walk every row of the returned report (seconds at 10,000).
    return quote((report, path))


def api_configured() -> bool:
    """Whether a Prefect API (a running server or Prefect Cloud) is configured."""
    return bool(PREFECT_API_URL.value())


def resolve_orchestrator(choice: Orchestrator, *, gate_only: bool) -> Literal["prefect", "inline"]:
    """``auto`` runs inline only for --gate-only with no API configured; otherwise Prefect."""
    if choice == "auto":
        return "inline" if gate_only and not api_configured() else "prefect"
    return choice


def run_eval(
    job: EvalJob, orchestrator: Orchestrator = "auto", *, runner: Runner = "local", dask_address: str | None = None
) -> tuple[Report, str]:
    """Run one eval under the chosen orchestrator; returns the report and its path.

    ``runner="dask"`` runs the shards on the Dask scheduler at ``dask_address``, or on a
    local cluster of two worker processes; it always runs under Prefect. The server
    runtime without a URL serves the same config on a free loopback port for the run.
    """
    if job.runtime == "server" and job.url is None:
        from docpilot.remote import local_server

        with local_server(job.config) as url:
            served = job.model_copy(update={"url": url})
            return run_eval(served, orchestrator, runner=runner, dask_address=dask_address)
    if runner == "dask" and orchestrator == "inline":
        raise OrchestratorError(
            "--runner dask runs the shards as Prefect task runs, so it cannot run inline\n"
            "  fix: drop --orchestrator inline, or drop --runner dask"
        )
    if runner == "local" and resolve_orchestrator(orchestrator, gate_only=job.gate_only) == "inline":
        return run_stages(job, _inline, "inline")
    # A heartbeat thread would hold the process up to a second at exit; a run of a
    # CLI process does not need crash detection by heartbeat.
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        try:
            with tags(*run_tags(job, runner=runner)):
                if runner == "dask":
                    from flows.dask import run_on_dask

                    return _unquoted(run_on_dask(eval_flow, job, dask_address))
                return _unquoted(eval_flow(job))
        except (RuntimeError, ValueError) as exc:
            if "Failed to reach API" in str(exc) or "No Prefect API URL" in str(exc):
                raise OrchestratorError(
                    f"cannot reach the Prefect API at {PREFECT_API_URL.value() or '(none configured)'}: {exc}\n"
                    "  fix: start it (`prefect server start`), correct PREFECT_API_URL, unset it to let "
                    "DocPilot start a temporary server, or run with --orchestrator inline"
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
