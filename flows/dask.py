"""An eval's shards on a Dask cluster: the same stages, run by worker processes, under Prefect.

The work that costs something per record, ranking and answering, is sent to the
cluster: every shard is submitted at once (``.submit()``) and the results are gathered
in shard order, so the rows come out as an inline run's do. The stage cache stays in
the flow's process: it fills in what is stored, sends only the records still to be
computed, and stores what comes back, so workers never touch the cache and two
workers never race on an entry. Priming, rendering and scoring cost microseconds a
record, less than shipping the records out and back, so they run in the flow's
process; the prompt is also what a cached answer is looked up by.

Workers report their task runs to Prefect, so they need a Prefect API every process
can reach: the configured one, or a server started for the run (``flows.server``).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from functools import partial

# Read when distributed is first imported, in this process and in the worker
# processes it starts: without it, closing a cluster logs a page of worker shutdowns.
os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")

from prefect import Flow, task  # noqa: E402
from prefect.cache_policies import NONE  # noqa: E402
from prefect.utilities.annotations import quote  # noqa: E402
from prefect_dask import DaskTaskRunner  # noqa: E402

from docpilot.errors import OrchestratorError  # noqa: E402
from docpilot.run import (
    pipeline,  # noqa: E402
    progress,
)
from docpilot.run.job import EvalJob, job_records, shards  # noqa: E402
from docpilot.run.workspace import Trace, open_workspace  # noqa: E402
from docpilot.schema import Report  # noqa: E402
from flows.server import prefect_api  # noqa: E402
from tasks import report as report_task  # noqa: E402
from tasks import stages  # noqa: E402

LOCAL_WORKERS = 2
"""Worker processes of the cluster started when no address is given."""

Lookup = Callable[[list[Trace]], list[int]]
Store = Callable[[list[Trace]], None]


class Parcel:
    """A shard's records on their way to a worker and back, in a box Prefect does not open.

    Prefect walks every task argument looking for futures, at about a millisecond a
    record, and Dask turns Prefect's ``quote`` (its way of skipping the walk) into a
    plain tuple. A plain object is neither walked nor rewritten.
    """

    __slots__ = ("traces",)

    def __init__(self, traces: list[Trace]) -> None:
        self.traces = traces


@task(name="retrieve", cache_policy=NONE)
def retrieve_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Rank a parcel's records: the retrieve stage, on a worker."""
    return Parcel(stages.retrieve.fn(job, parcel.traces))


@task(name="model", cache_policy=NONE)
def answer_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Answer a parcel's records: the model stage, on a worker."""
    return Parcel(stages.model.fn(job, parcel.traces))


def dask_task_runner(address: str | None = None, *, workers: int = LOCAL_WORKERS) -> DaskTaskRunner:
    """A task runner on the Dask scheduler at ``address``, or on a new local cluster of ``workers`` processes."""
    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None},
    )


def run_on_dask(flow: Flow, job: EvalJob, address: str | None = None):
    """Run ``flow`` (the eval flow) with its shards on Dask, against a Prefect API every worker reaches."""
    if job.runtime != "local":
        raise OrchestratorError(
            f"--runner dask runs the stages in worker processes; with --runtime {job.runtime} a server runs them\n"
            "  fix: drop --runner dask, or use --runtime local"
        )
    if address:
        _check_reachable(address)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with prefect_api():
        return flow.with_options(task_runner=dask_task_runner(address))(job, runner="dask")


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    # Before a Prefect server is started for nothing, and before Dask's own 30 s timeout.
    scheme, _, location = address.rpartition("://")
    host, _, port = location.rpartition(":")
    if scheme not in ("", "tcp") or not port.isdigit():
        return  # another transport: Dask itself says what is wrong
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise OrchestratorError(
            f"--dask-address {address}: no Dask scheduler answers there ({exc.strerror or exc})\n"
            "  fix: start one with `dask scheduler` and workers with `dask worker ADDRESS`, check the address, "
            "or leave out --dask-address to start a local cluster"
        ) from None


def run_distributed(job: EvalJob) -> tuple[Report, str]:
    """Inside the flow: every shard's uncached ranking and answering on the task runner, the rest here."""
    start = time.perf_counter()
    # Opened before anything is submitted, so the index is built and saved once, here,
    # and the workers load it.
    workspace = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)
    remote = job.model_copy(update={"use_cache": False, "refresh": []})
    records = job_records(job)
    batches = [pipeline.start_traces(shard) for shard in shards(records, job.config.shard_size)]
    for stage in ("retrieve",) if job.gate_only else ("retrieve", "model"):
        progress.start(stage, len(records))

    _compute_missing("retrieve", retrieve_parcel, remote, batches,
                     partial(pipeline.lookup_rankings, workspace, refresh="retrieve" in job.refresh),
                     partial(pipeline.store_rankings, workspace))
    if not job.gate_only:
        batches = [stages.prime(job, quote(batch)) for batch in batches]
        _compute_missing("model", answer_parcel, remote, batches,
                         partial(pipeline.lookup_turns, workspace, refresh="model" in job.refresh),
                         partial(pipeline.store_turns, workspace))
        batches = [stages.render(job, quote(batch)) for batch in batches]
    rows = [row for batch in batches for row in stages.score(job, quote(batch))]
    wall_ms = (time.perf_counter() - start) * 1000
    return report_task.report(job, quote(rows), wall_ms, "prefect")


def _compute_missing(stage: str, task, remote: EvalJob, batches: list[list[Trace]], lookup: Lookup,
                     store: Store) -> None:
    """Look every shard up, submit the missing records of all of them, then store and merge the results."""
    submitted = []
    for batch in batches:
        todo = lookup(batch)
        progress.advance(stage, sum(stage in trace.cached for trace in batch))
        if todo:
            submitted.append((batch, todo, task.submit(remote, Parcel([batch[p] for p in todo]))))
    for batch, todo, future in submitted:
        computed = future.result().traces
        store(computed)
        progress.advance(stage, len(computed))
        for position, trace in zip(todo, computed, strict=True):
            batch[position] = trace
