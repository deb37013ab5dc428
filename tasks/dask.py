"""The tasks a Dask worker runs: ranking and answering a shard, in a box Prefect does not open.

Prefect walks every task argument looking for futures, at about a millisecond a
record, and Dask turns Prefect's ``quote`` (its way of skipping the walk) into a plain
tuple. A plain object is neither walked nor rewritten, so the shard travels in one.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.run import stages
from docpilot.run.job import EvalJob
from docpilot.run.workspace import Trace


class Parcel:
    """A shard's records on their way to a worker and back."""

    __slots__ = ("traces",)

    def __init__(self, traces: list[Trace]) -> None:
        self.traces = traces


@task(name="retrieve", cache_policy=NONE)
def retrieve_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Rank a parcel's records: the retrieve stage, on a worker."""
    return Parcel(stages.retrieve(job, parcel.traces))


@task(name="model", cache_policy=NONE)
def answer_parcel(job: EvalJob, parcel: Parcel) -> Parcel:
    """Answer a parcel's records: the model stage, on a worker."""
    return Parcel(stages.model(job, parcel.traces))


PARCEL_TASKS = {stages.retrieve: retrieve_parcel, stages.model: answer_parcel}
"""Stage function → the task that runs it on a worker."""
