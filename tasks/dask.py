"""The tasks a Dask worker runs: ranking and answering a shard, in a box Prefect does not open.

Prefect walks every task argument looking for futures, at about a millisecond a
record, and Dask turns Prefect's ``quote`` (its way of skipping the walk) into a plain
tuple. A plain object is neither walked nor rewritten, so the shard travels in one.

``model.concurrency`` is the bound the endpoint sees, however many workers answer: a
parcel to be answered carries each answering worker's share of it (``turn_shares``),
and the worker keeps only its own share of turns in flight.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.run import stages
from docpilot.run.job import EvalJob
from docpilot.run.lane import concurrency_share
from docpilot.assistant.workspace import Trace


class Parcel:
    """A shard's records on their way to a worker and back, with the turns each worker may keep in flight."""

    __slots__ = ("shares", "traces")

    def __init__(self, traces: list[Trace], shares: dict[str, int] | None = None) -> None:
        self.traces = traces
        self.shares = shares
        """Worker address → its share of ``model.concurrency``; None where nothing is answered."""


def turn_shares(concurrency: int, workers: list[str]) -> dict[str, int]:
    """Split ``concurrency`` turns over ``workers`` (addresses): the shares add up to it and none is 0.

    With fewer turns than workers only the first ``concurrency`` workers (in address
    order) get a share, one turn each; the others answer nothing.
    """
    chosen = sorted(workers)[: max(1, concurrency)]
    return {
        address: concurrency // len(chosen) + (1 if index < concurrency % len(chosen) else 0)
        for index, address in enumerate(chosen)
    }


@task(name="retrieve", cache_policy=NONE)
def retrieve_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Rank a parcel's records: the retrieve stage, on a worker."""
    return Parcel(stages.retrieve(job, parcel.traces))


@task(name="model", cache_policy=NONE)
def answer_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Answer a parcel's records: the model stage, on a worker, within this worker's share of the turns."""
    from distributed import get_worker

    share = (parcel.shares or {}).get(get_worker().address)
    if share is None:  # only the workers with a share are sent parcels to answer
        raise RuntimeError(f"worker {get_worker().address} was sent turns to answer but has no share of them")
    with concurrency_share(share):
        return Parcel(stages.model(job, parcel.traces))


PARCEL_TASKS = {stages.retrieve: retrieve_parcel, stages.model: answer_parcel}
"""Stage function → the task that runs it on a worker."""
