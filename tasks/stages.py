"""The stage tasks: each stage function of ``docpilot.run.stages``, unchanged, as a Prefect task.

Caching is DocPilot's own (per record, inside the core), so Prefect's is off: a
Prefect cache hit would still cost a full task run, and the workspace argument is not
hashable. ``TASKS`` maps each stage function to its task, so the flow can run the
core's single wiring (``docpilot.run.wiring``) with task runs in place of calls.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE
from prefect.utilities.annotations import quote

from docpilot.run import stages

retrieve = task(stages.retrieve, name="retrieve", cache_policy=NONE)
prime = task(stages.prime, name="prime", cache_policy=NONE)
model = task(stages.model, name="model", cache_policy=NONE)
remote = task(stages.remote, name="remote", cache_policy=NONE, retries=1, retry_delay_seconds=2)
render = task(stages.render, name="render", cache_policy=NONE)
score = task(stages.score, name="score", cache_policy=NONE)
report = task(stages.report, name="report", cache_policy=NONE)

TASKS = {
    stages.retrieve: retrieve,
    stages.prime: prime,
    stages.model: model,
    stages.remote: remote,
    stages.render: render,
    stages.score: score,
    stages.report: report,
}
"""Stage function → its task."""


def as_task_run(stage, *args):
    """Run a stage function as its Prefect task run and return its result."""
    return TASKS[stage](*quoted(args))


def quoted(args: tuple) -> list:
    """Task arguments with every list quoted: Prefect walks arguments looking for futures, and a shard's list is long."""
    return [quote(a) if isinstance(a, list) else a for a in args]
