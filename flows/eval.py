"""The eval under Prefect: ``evaluate``'s run inside the eval flow, a task run per shard.

The order of the steps is written once, in ``docpilot.run.road``; ``evaluate(job,
executor)`` is the one way into an eval. The planner (``flows.plan``) hands it a
``PrefectExecutor`` when the run is to show up in Prefect, whose run happens inside the
``docpilot-eval`` flow (``flow_around``), each shard a task run (``prefect_shards``), on
this process or on a Dask cluster's workers (``flows.dask``); the scorecard is
published as the flow's artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar
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

from docpilot.errors import OrchestratorError
from docpilot.run.context import RunContext
from docpilot.run.evaluation import in_order
from docpilot.run.job import EvalJob
from docpilot.schema import Report, Row

Runner = Literal["local", "dask"]

_RUN: ContextVar[Callable[[], Report]] = ContextVar("docpilot_eval_run")
"""The run the eval flow runs: set by ``PrefectExecutor.around`` around the flow's call. Not a flow
parameter, so Prefect neither records it nor (on Dask) pickles its locks and progress."""


def current_run() -> Callable[[], Report]:
    """The run the eval flow is to run. (Dask pickles the flow's function by value, with what it names: it
    names this function, which pickles by reference, and never the context variable itself.)"""
    return _RUN.get()


def prefect_shards(run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
    """A task run per shard, ``SHARDS_AT_ONCE`` submitted at once, rows in shard order."""
    # quote: Prefect would walk the run and every record looking for futures.
    return in_order(run, shards, lambda records: shard.submit(quote(run), quote(records)),
                    settle=lambda future: future.wait())


@flow(name="docpilot-eval", validate_parameters=False)
def eval_flow(job: EvalJob, runner: Runner = "local") -> quote:
    """Evaluate a golden set, one Prefect task run per shard (on Dask's workers with ``runner="dask"``);
    publish the scorecard."""
    # The run's tags mark the flow run. Its task runs go untagged: Prefect asks its API for
    # concurrency slots for the tags of every task run as it starts, a round trip per
    # shard that the server, busy with the run's events, answers slowly.
    with TagsContext(current_tags=set()):
        report = current_run()()
        publish_scorecard(quote(report), report.path)  # quote: Prefect would walk every row
    # quote: Prefect would otherwise walk every row of the returned report (seconds at 10,000).
    return quote(report)


def flow_around(job: EvalJob, body: Callable[[], Report], *, runner: Runner = "local",
                dask_address: str | None = None) -> Report:
    """Run ``body`` (``evaluate``'s run) inside the eval flow, its shards on Dask's workers with ``runner="dask"``."""
    token = _RUN.set(body)
    try:
        return _flow(job, runner, dask_address)
    finally:
        _RUN.reset(token)


def _flow(job: EvalJob, runner: Runner, dask_address: str | None) -> Report:
    # A heartbeat thread would hold the process up to a second at exit; a run of a
    # CLI process does not need crash detection by heartbeat.
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        try:
            with tags(*run_tags(job, runner=runner)):
                if runner == "dask":
                    from docpilot.flows.dask import run_on_dask

                    return _unquoted(run_on_dask(eval_flow, job, dask_address))
                return _unquoted(eval_flow(job))
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
