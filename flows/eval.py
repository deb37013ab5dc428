"""The eval flow: every shard through retrieve → prime → model → render → score, then the report.

``run_stages`` is the wiring, written once for both orchestrators: under Prefect each
call is a task run (one per stage per shard); inline, the same task functions are
called directly with no server. The results are the same either way. A Dask run
(``flows.dask``) sends the shards out concurrently with the same tasks.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

from prefect import flow, tags
from prefect.context import TagsContext
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    temporary_settings,
)
from prefect.utilities.annotations import quote

from docpilot.errors import OrchestratorError
from docpilot.run import progress
from docpilot.run.job import EvalJob, job_records, shards
from docpilot.run.lane import cancel_lanes, reset_lanes
from docpilot.run.pipeline import start_traces
from docpilot.schema import Report
from tasks import report as report_task
from tasks import stages
from tasks.artifacts import publish_scorecard, run_tags

Orchestrator = Literal["auto", "prefect", "inline"]
Runner = Literal["local", "dask"]
Call = Callable[..., Any]
Submit = Callable[..., Any]  # returns a future: .result() waits for the stage


# Model stages sent ahead of the one being finished. One is enough for the lane to
# have the next shard queued when a shard's last turns are in flight; more would rank
# and prime several shards at once at the start, competing with the first turns.
LOOKAHEAD = 1


def run_stages(job: EvalJob, call: Call, submit: Submit, orchestrator: str) -> tuple[Report, str]:
    """Run every stage over every shard, then score and write the report.

    ``call`` runs a stage and returns its result; ``submit`` starts one and returns a
    future. Model stages are submitted so that they overlap: while one shard's turns
    are in flight, the next shard is ranked and primed and its turns queue up behind,
    and the shard before is rendered and scored. Cached turns are filled in here, so a
    shard whose turns are all cached sends no model task.
    """
    start = time.perf_counter()
    reset_lanes()
    # What exists now (imports, the corpus, the index) lives for the whole run; frozen, the
    # garbage collector stops walking it again and again (a full pass over a process that
    # has imported Prefect takes over 0.1 s). Unfrozen at the end, it is collected as usual.
    # The run's own objects are many and short-lived: young-generation passes come less
    # often, each over more objects, which costs less in all.
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
    try:
        return _run_stages(job, call, submit, orchestrator, start)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _run_stages(job: EvalJob, call: Call, submit: Submit, orchestrator: str, start: float) -> tuple[Report, str]:
    records = job_records(job)
    for stage in ("retrieve",) if job.gate_only else ("retrieve", "model"):
        progress.start(stage, len(records))
    rows: list = []
    answering: deque = deque()  # model stages submitted, oldest first

    def finish_oldest() -> None:
        traces = call(stages.render, job, answering.popleft().result())
        rows.extend(call(stages.score, job, traces))

    try:
        # A first shard of one round of turns gets the model going while the rest are ranked.
        first = None if job.gate_only else job.config.model.concurrency
        for shard in shards(records, job.config.shard_size, first=first):
            if job.runtime == "server":
                traces = call(stages.remote, job, start_traces(shard))
                rows.extend(call(stages.score, job, call(stages.render, job, traces)))
                continue
            traces = call(stages.retrieve, job, start_traces(shard))
            if job.gate_only:
                rows.extend(call(stages.score, job, traces))
                continue
            traces = call(stages.prime, job, traces)
            if stages.look_up_turns(job, traces):
                answering.append(submit(stages.model, job, traces))
            else:  # every turn is cached: no model task
                answering.append(_done(traces))
            if len(answering) > LOOKAHEAD:
                finish_oldest()
        while answering:
            finish_oldest()
    except BaseException:
        cancel_lanes()  # the model stages still waiting return now; answered turns stay stored
        raise
    wall_ms = (time.perf_counter() - start) * 1000
    return call(report_task.report, job, rows, wall_ms, orchestrator)


def _done(result) -> Future:
    done: Future = Future()
    done.set_result(result)
    return done


def _inline(task, *args):
    return task.fn(*args)


def _as_task_run(task, *args):
    # Prefect walks task arguments looking for futures; quote() spares it the lists.
    return task(*_quoted(args))


def _submit_task_run(task, *args):
    return task.submit(*_quoted(args))


def _quoted(args: tuple) -> list:
    return [quote(a) if isinstance(a, list) else a for a in args]


@flow(name="docpilot-eval", validate_parameters=False)
def eval_flow(job: EvalJob, runner: Runner = "local") -> quote:
    """Evaluate a golden set, one Prefect task run per stage per shard; publish the scorecard.

    ``runner="dask"`` sends the shards to the flow's Dask task runner (``flows.dask``).
    """
    # The run's tags mark the flow run. Its task runs go untagged: Prefect asks its API for
    # concurrency slots for the tags of every task run as it starts, a round trip per
    # stage and shard that the server, busy with the run's events, answers slowly.
    with TagsContext(current_tags=set()):
        if runner == "dask":
            from flows.dask import run_distributed

            report, path = run_distributed(job)
        else:
            report, path = run_stages(job, _as_task_run, _submit_task_run, "prefect")
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
        from docpilot.run.remote import local_server

        with local_server(job.config) as url:
            served = job.model_copy(update={"url": url})
            return run_eval(served, orchestrator, runner=runner, dask_address=dask_address)
    if runner == "dask" and orchestrator == "inline":
        raise OrchestratorError(
            "--runner dask runs the shards as Prefect task runs, so it cannot run inline\n"
            "  fix: drop --orchestrator inline, or drop --runner dask"
        )
    if runner == "local" and resolve_orchestrator(orchestrator, gate_only=job.gate_only) == "inline":
        with ThreadPoolExecutor(max_workers=LOOKAHEAD + 1, thread_name_prefix="docpilot-stage") as pool:
            return run_stages(job, _inline, lambda task, *args: pool.submit(task.fn, *args), "inline")
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
