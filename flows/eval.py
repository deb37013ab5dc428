"""The eval flow: ``evaluate`` with every shard a Prefect task run, then the scorecard artifact.

The order of the stages is written once, in ``docpilot.run.road``; this module hands
``evaluate`` an executor whose shards are task runs (one per shard, every stage inside
it) and publishes the scorecard. ``run_eval`` runs one eval under the orchestrator
``docpilot.run.orchestrator`` chooses; an inline run never needs this module. A Dask
run (``flows.dask``) sends the shards to the cluster's workers instead.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from typing import Literal

from docpilot.tasks.artifacts import publish_scorecard, run_tags
from docpilot.tasks.stages import shard
from prefect import flow, tags
from prefect.context import TagsContext
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)
from prefect.utilities.annotations import quote

from docpilot import progress as progress_module
from docpilot.errors import OrchestratorError
from docpilot.progress import Progress
from docpilot.run.context import RunContext
from docpilot.run.evaluation import SHARDS_AT_ONCE, evaluate
from docpilot.run.job import EvalJob
from docpilot.run.orchestrator import Choice, Orchestration, choose
from docpilot.schema import Report, Row

Orchestrator = Choice
Runner = Literal["local", "dask"]


def prefect_shards(run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
    """The Prefect executor: a task run per shard, ``SHARDS_AT_ONCE`` submitted at once, rows in shard order."""
    pending: deque = deque()
    try:
        for records in shards:
            # quote: Prefect would walk the run and every record looking for futures.
            pending.append(shard.submit(quote(run), quote(records)))
            if len(pending) >= SHARDS_AT_ONCE:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BaseException:
        run.cancel()  # the task runs still under way stop now; the turns answered stay stored
        for future in pending:
            future.wait()
        raise


@flow(name="docpilot-eval", validate_parameters=False)
def eval_flow(job: EvalJob, runner: Runner = "local", orchestration: Orchestration | None = None,
              progress: Progress | None = None, interrupt: threading.Event | None = None) -> quote:
    """Evaluate a golden set, one Prefect task run per shard; publish the scorecard.

    ``runner="dask"`` sends the shards to the flow's Dask task runner (``flows.dask``).
    """
    # The run's tags mark the flow run. Its task runs go untagged: Prefect asks its API for
    # concurrency slots for the tags of every task run as it starts, a round trip per
    # shard that the server, busy with the run's events, answers slowly.
    orchestration = orchestration or choose("prefect", runner=runner)
    with TagsContext(current_tags=set()):
        if runner == "dask":
            from docpilot.flows.dask import dask_shards

            executor = dask_shards
        else:
            executor = prefect_shards
        report = evaluate(job, progress=progress, orchestration=orchestration, executor=executor,
                          interrupt=interrupt)
        publish_scorecard(quote(report), report.path)  # quote: Prefect would walk every row
    # quote: Prefect would otherwise walk every row of the returned report (seconds at 10,000).
    return quote(report)


def run_eval(
    job: EvalJob, orchestrator: Orchestrator | Orchestration = "auto", *, runner: Runner = "local",
    dask_address: str | None = None, progress: Progress | None = None, interrupt: threading.Event | None = None,
) -> Report:
    """Run one eval under the chosen orchestrator; its report (``report.path`` says where it is written).

    ``orchestrator`` is a choice (``auto`` picks as ``docpilot.run.orchestrator.choose``
    does) or an orchestration already chosen. ``runner="dask"`` runs the shards on the
    Dask scheduler at ``dask_address``, or on a local cluster of two worker processes;
    it always runs under Prefect. An inline run is ``evaluate`` alone.
    """
    orchestration = orchestrator if isinstance(orchestrator, Orchestration) else choose(orchestrator, runner=runner)
    if runner == "dask" and orchestration.orchestrator == "inline":
        raise OrchestratorError(
            "--runner dask runs the shards as Prefect task runs, so it cannot run inline\n"
            "  fix: drop --orchestrator inline, or drop --runner dask"
        )
    if orchestration.orchestrator == "inline":
        return evaluate(job, progress=progress, orchestration=orchestration, interrupt=interrupt)
    from docpilot.run.orchestrator import configured_api

    if runner == "dask" or not configured_api():
        from docpilot.run.reaper import watch_children

        watch_children()  # Prefect's temporary server or a Dask cluster: gone if this process is killed
    return _run_flow(job, orchestration, runner, dask_address, progress, interrupt)


def _run_flow(job: EvalJob, orchestration: Orchestration, runner: Runner, dask_address: str | None,
              progress: Progress | None, interrupt: threading.Event | None) -> Report:
    # A heartbeat thread would hold the process up to a second at exit; a run of a
    # CLI process does not need crash detection by heartbeat.
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        try:
            with tags(*run_tags(job, runner=runner)):
                if runner == "dask":
                    from docpilot.flows.dask import run_on_dask

                    # Dask pickles the flow run's context, parameters included, with every task: a
                    # progress or a stop flag (locks, thread-locals) cannot go. The flow counts into
                    # this thread's progress (``docpilot.progress.current``).
                    with progress_module.counting(progress) if progress else contextlib.nullcontext():
                        return _unquoted(run_on_dask(eval_flow, job, dask_address, orchestration))
                return _unquoted(eval_flow(job, orchestration=orchestration, progress=progress,
                                           interrupt=interrupt))
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
