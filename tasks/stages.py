"""The stage tasks. Each unpacks its arguments and calls one core function over a shard.

Caching is DocPilot's own (per record, inside the core), so Prefect's is off: a
Prefect cache hit would still cost a full task run, and the workspace argument is not
hashable.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NONE

from docpilot.run import pipeline, progress, workspace
from docpilot.run.job import EvalJob
from docpilot.run.lane import Interrupted
from docpilot.run.workspace import Trace
from docpilot.schema import Row


def _workspace(job: EvalJob) -> workspace.Workspace:
    return workspace.open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)


@task(name="retrieve", cache_policy=NONE)
def retrieve(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Rank sections for a shard."""
    return pipeline.retrieve_shard(_workspace(job), traces, refresh="retrieve" in job.refresh)


@task(name="prime", cache_policy=NONE)
def prime(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Build a shard's prompts and apply the retrieval gate."""
    return pipeline.prime_shard(_workspace(job), traces)


def look_up_turns(job: EvalJob, traces: list[Trace]) -> bool:
    """Fill in a primed shard's cached turns, in the calling thread; whether any record still needs the model.

    Not a task: it runs in the flow, before the model task is sent, so a shard whose
    turns are all cached needs no model task at all.
    """
    todo = pipeline.lookup_turns(_workspace(job), traces, refresh="model" in job.refresh)
    progress.advance("model", len(traces) - len(todo))
    return bool(todo)


@task(name="model", cache_policy=NONE)
def model(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Answer a shard's records that have no turn yet, concurrently and bounded; faults mark records, not the task."""
    try:
        return pipeline.answer_shard(_workspace(job), traces)
    except Interrupted:
        # The run is stopping (Ctrl-C, SIGTERM) and nobody will read this shard: the turns
        # answered so far are stored. Failing the task would only print its traceback.
        return traces


@task(name="remote", cache_policy=NONE, retries=1, retry_delay_seconds=2)
def remote(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Ask the assistant's HTTP server a shard's questions: retrieve, prime and model, over the network."""
    from docpilot.run.remote import remote_shard

    traces, stages = remote_shard(_workspace(job), traces, job.url, concurrency=job.config.model.concurrency)
    for trace in traces:
        trace.stages_ms = stages.get(trace.record.id, {})
    return traces


@task(name="render", cache_policy=NONE)
def render(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Render a shard's answers into panels."""
    return pipeline.render_shard(_workspace(job), traces)


@task(name="score", cache_policy=NONE)
def score(job: EvalJob, traces: list[Trace]) -> list[Row]:
    """Turn a shard's traces into report rows."""
    if job.gate_only:
        return pipeline.build_rows(traces, gate_only=True)
    from docpilot.assistant.language import corpus_language

    return pipeline.build_rows(traces, corpus_language=corpus_language(_workspace(job).corpus))
