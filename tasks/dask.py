"""The task a Dask worker runs: a shard of records down the road, in a box Prefect does not open.

Prefect walks every task argument looking for futures, at about a millisecond a
record, and Dask turns Prefect's ``quote`` (its way of skipping the walk) into a plain
tuple. A plain object is neither walked nor rewritten, so the shard travels in one.

A worker has no run of the eval's process to join: it opens the run's workspace (kept
by ``open_workspace`` while the docs stay the same) and a context of its own for the
shard, and sends it down the same road as an inline run does.

``model.concurrency`` is the bound the endpoint sees, however many workers answer: a
parcel carries each answering worker's share of it (``turn_shares``), and the worker
keeps only its own share of turns in flight.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.assistant.workspace import open_workspace
from docpilot.run.assistants import OwnAssistant
from docpilot.run.context import RunContext
from docpilot.run.job import EvalJob
from docpilot.run.limiter import Limiter, split
from docpilot.run.road import travel


class Parcel:
    """A shard's records on their way to a worker (and its rows on the way back), with the turns each
    worker may keep in flight."""

    __slots__ = ("items", "shares")

    def __init__(self, items: list, shares: dict[str, int] | None = None) -> None:
        self.items = items
        self.shares = shares
        """Worker address → its share of ``model.concurrency``; None where nothing is answered."""


def turn_shares(concurrency: int, workers: list[str]) -> dict[str, int]:
    """Split ``concurrency`` turns over ``workers`` (addresses): the shares add up to it and none is 0.

    With fewer turns than workers only the first ``concurrency`` workers (in address
    order) get a share, one turn each; the others answer nothing.
    """
    chosen = sorted(workers)[: max(1, concurrency)]
    return dict(zip(chosen, split(concurrency, len(chosen)), strict=True))


@task(name="shard", cache_policy=NONE)
def shard_on_worker(job: EvalJob, parcel: Parcel) -> Parcel:
    """A shard down the road on a worker, within this worker's share of the turns; its rows."""
    from distributed import get_worker

    share = (parcel.shares or {}).get(get_worker().address)
    if share is None:  # only the workers with a share are sent parcels
        raise RuntimeError(f"worker {get_worker().address} was sent a shard but has no share of the turns")
    workspace = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)
    # The job's config points at the endpoint the eval's process started (the local provider's server).
    run = RunContext(job, workspace, OwnAssistant(endpoint_ready=True), Limiter(share))
    try:
        return Parcel(travel(run, parcel.items))
    finally:
        run.close()
