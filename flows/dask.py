"""An eval's shards on a Dask cluster: each shard down the road (``docpilot.run.road``) on a worker process.

Every shard is submitted at once and the rows are gathered in shard order, so they
come out as an inline run's do; the road is the one every run takes, only where it
runs differs. A worker reads and writes the stage cache itself (the cluster started
for a run, or one whose workers share the eval's disk), so a re-run on Dask computes
only what changed. The worker task is ``tasks.dask``'s.

Workers report their task runs to Prefect, so they need a Prefect API every process
can reach: the configured one, or a server started for the run (``tasks.prefect_server``).

``model.concurrency`` bounds the turns in flight across the whole cluster. When the
first shard is sent, the run notes the workers connected then and splits the bound
between them (``tasks.dask.turn_shares``); each shard is held to those workers and
carries their shares, so the endpoint never sees more than the configured number.
The split is the run's, kept on its task runner. The local provider's server is
started here, before the first shard is sent; each worker reads its first reply
strictly, as an inline run does.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import dask
from docpilot.tasks.dask import Parcel, shard_on_worker, turn_shares
from docpilot.tasks.prefect_server import prefect_api
from prefect import Flow
from prefect.context import FlowRunContext
from prefect_dask import DaskTaskRunner

from docpilot.assistant.workspace import open_workspace
from docpilot.errors import OrchestratorError
from docpilot.run.context import RunContext
from docpilot.run.job import EvalJob
from docpilot.schema import Row

LOCAL_WORKERS = 2
"""Worker processes of the cluster started when no address is given."""


def dask_shards(run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
    """The Dask executor: every shard submitted to the workers at once; their rows in shard order."""
    job = run.job
    if not job.gate_only:
        # The config the workers send turns with: for the local provider, pointing at its server.
        job = job.model_copy(update={"config": job.config.model_copy(update={"model": run.assistant.endpoint(run)})}) \
            if _starts_a_server(job) else job
    shares = FlowRunContext.get().task_runner.turn_shares(job.config.model.concurrency)
    # Only the workers given a share answer: a worker outside the split would add turns of its own.
    with dask.annotate(workers=list(shares), allow_other_workers=False):
        futures = [(len(records), shard_on_worker.submit(job, Parcel(records, shares))) for records in shards]
    for size, future in futures:
        rows = future.result().items
        run.progress.advance("retrieve", size)
        if not job.gate_only:
            run.progress.advance("model", size * job.config.model.repeat)  # a turn per sample, as inline
        yield rows


def _starts_a_server(job: EvalJob) -> bool:
    from docpilot.models.registry import provider_of

    return provider_of(job.config.model).endpoint == "served" and not job.config.model.base_url


class SharingTaskRunner(DaskTaskRunner):
    """Prefect's Dask task runner, which also splits the model's concurrency between the run's workers, once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)  # Prefect runs a flow on a copy (``duplicate``), which starts unsplit
        # No lock: Prefect pickles the runner, and a second look at the same workers would
        # give the same split anyway.
        self._shares: dict[str, int] | None = None

    def turn_shares(self, concurrency: int) -> dict[str, int]:
        """Worker address → the turns it may keep in flight; noted when first asked, then kept for the run."""
        if self._shares is None:
            self._shares = turn_shares(concurrency, self._workers())
        return self._shares

    def _workers(self) -> list[str]:
        # None when the run starts means the cluster has lost them all.
        workers = list(self.client.scheduler_info(n_workers=-1)["workers"])
        if not workers:
            raise OrchestratorError(
                "the Dask cluster has no worker left to answer the run's questions\n"
                "  fix: start workers with `dask worker ADDRESS`, or leave out --dask-address for a local cluster"
            )
        return workers


def dask_task_runner(address: str | None = None, *, workers: int = LOCAL_WORKERS) -> SharingTaskRunner:
    """A task runner on the Dask scheduler at ``address``, or on a new local cluster of ``workers`` processes."""
    if address:
        return SharingTaskRunner(address=address)
    return SharingTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs=local_cluster_options(workers))


def local_cluster_options(workers: int = LOCAL_WORKERS) -> dict:
    """``LocalCluster`` options of the cluster started for a run: ``workers`` single-threaded
    processes, no dashboard, and the scheduler's HTTP routes on a free loopback port (without
    one they take 8787 on every interface, and warn when another cluster holds it). Each
    worker runs ``tasks.dask_worker`` first, which keeps it quiet about the heartbeat that
    finds the scheduler gone as the cluster closes."""
    return {
        "n_workers": workers, "threads_per_worker": 1, "processes": True,
        "dashboard_address": None, "scheduler_kwargs": {"dashboard_address": "127.0.0.1:0"},
        "preload": ["docpilot.tasks.dask_worker"],
    }


def run_on_dask(flow: Flow, job: EvalJob, address: str | None = None):
    """Run ``flow`` (the eval flow) with its shards on Dask, against a Prefect API every worker reaches."""
    if address:
        _check_reachable(address)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    # Opened before anything is submitted, so the index is built and saved once, here,
    # and the workers load it.
    open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)
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
