"""The eval's one task: a shard of records down the road (``docpilot.run.road.travel``), as a Prefect task run.

A task run costs milliseconds of the client and tens of the server (``PREFECT.md``), so
a task covers a whole shard, every stage of it, with the per-record cache look-ups
inside the road. Caching is DocPilot's own, so Prefect's is off: a Prefect cache hit
would still cost a full task run, and the run's context is not hashable.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.run.context import RunContext
from docpilot.run.lane import Interrupted
from docpilot.run.road import travel
from docpilot.schema import Row


@task(name="shard", cache_policy=NONE)
def shard(run: RunContext, records: list) -> list[Row]:
    """Take a shard of the run's records down the road; their rows (none when the run is stopping)."""
    try:
        return travel(run, records)
    except Interrupted:
        # The run is stopping (Ctrl-C, SIGTERM): the turns answered so far are stored, and the
        # run raises once its shards are in. A failed task run would only print a traceback.
        return []
