"""The stages of an eval as functions of a job and a shard: what inline, Prefect and Dask runs all call.

Each unpacks the job and calls one ``pipeline`` function over the shard. Run inline,
they are called as they are; under Prefect, ``tasks`` wraps each in a task, unchanged,
so both orchestrators run the same code and give the same rows.
"""

from __future__ import annotations

from docpilot.reports.changes import page_fingerprints, side_file_fingerprints
from docpilot.reports.report import assemble_report, write_report
from docpilot import progress
from docpilot.run import pipeline
from docpilot.run.context import RunContext, context_of
from docpilot.run.job import EvalJob
from docpilot.run.lane import Interrupted
from docpilot.assistant.workspace import Trace, Workspace, open_workspace
from docpilot.schema import Report, Row

def _opened(job: EvalJob) -> tuple[RunContext, Workspace]:
    """The job's run, and the workspace it ranks with: the corpus the run started with.

    Here and on a worker, ranking other docs would store results under keys they do not
    belong to. The run keeps each workspace it opened (a ready job's config differs from
    the one the run was built with: the local provider's server has its address then).
    """
    run = context_of(job)
    key = (job.config.model_dump_json(), job.use_cache)
    workspace = run.workspaces.get(key)
    if workspace is None:
        with progress.counting(run.progress):  # building a missing index counts its chunks
            workspace = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)
        run.workspaces[key] = workspace
    return run, workspace


def _workspace(job: EvalJob) -> Workspace:
    return _opened(job)[1]


def look_up_rankings(job: EvalJob, traces: list[Trace]) -> list[int]:
    """Fill in a shard's cached rankings, in the calling process; the positions still to rank."""
    run, workspace = _opened(job)
    if run.before_ranking is not None:
        run.before_ranking(traces)
    todo = pipeline.lookup_rankings(workspace, traces, refresh="retrieve" in job.refresh)
    run.progress.advance("retrieve", len(traces) - len(todo))
    return todo


def retrieve(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Rank sections for every record of the shard (and store the rankings when the job caches)."""
    run, workspace = _opened(job)
    with progress.counting(run.progress):
        return pipeline.rank_shard(workspace, traces)


def prime(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Build a shard's prompts and apply the retrieval gate."""
    return pipeline.prime_shard(_workspace(job), traces)


def look_up_turns(job: EvalJob, traces: list[Trace]) -> list[int]:
    """Fill in a primed shard's cached turns, in the calling process; the positions still to answer."""
    run, workspace = _opened(job)
    todo = pipeline.lookup_turns(workspace, traces, refresh="model" in job.refresh)
    run.progress.advance("model", len(traces) - len(todo))
    return todo


def model(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Answer the shard's records that have no turn yet, concurrently and bounded; faults mark records."""
    try:
        run, workspace = _opened(job)
        return pipeline.answer_shard(workspace, traces, run=run)
    except Interrupted:
        # The run is stopping (Ctrl-C, SIGTERM) and nobody will read this shard: the turns
        # answered so far are stored. Raising would only print a traceback.
        return traces


def answer_ahead(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Answer turns ahead of the run's own model stage (``wiring.leading``), which counts them and waits for them."""
    try:
        run, workspace = _opened(job)
        return pipeline.answer_shard(workspace, traces, run=run, counted=False)
    except Interrupted:
        return traces


def lane_held(job: EvalJob):
    """A context that keeps the run's model lane open (and what it answered) for its duration."""
    run, workspace = _opened(job)
    return pipeline.lane_held(run, workspace)


def remote(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Ask the assistant's HTTP server a shard's questions: retrieve, prime and model, over the network."""
    from docpilot.run.remote import remote_shard

    run, workspace = _opened(job)
    traceparent = run.trace.traceparent if run.trace is not None else None  # the server's turns join the run's trace
    traces, stages = remote_shard(workspace, traces, job.url, concurrency=job.config.model.concurrency,
                                  traceparent=traceparent)
    for trace in traces:
        trace.stages_ms = stages.get(trace.record.id, {})
    return traces


def render(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Render a shard's answers into panels."""
    return pipeline.render_shard(_workspace(job), traces)


def score(job: EvalJob, traces: list[Trace]) -> list[Row]:
    """Turn a shard's traces into report rows, and work out their metric values for the report to come."""
    if job.gate_only:
        return pipeline.build_rows(traces, gate_only=True)
    from docpilot.assistant.language import corpus_language

    run, workspace = _opened(job)
    rows = pipeline.build_rows(traces, corpus_language=corpus_language(workspace.corpus), model=job.config.model)
    run.scored.add(rows)
    if run.after_scoring is not None:
        run.after_scoring(rows)
    if run.trace is not None:  # sent while later shards still wait on the model
        run.trace.add(rows, gate_only=False, model={"name": job.config.model.name})
    return rows


def store(job: EvalJob, stage: str, traces: list[Trace]) -> None:
    """Store rankings or turns computed in another process, in this one's cache."""
    workspace = _workspace(job)
    if stage == "retrieve":
        pipeline.store_rankings(workspace, traces)
    else:
        pipeline.store_turns(workspace, traces)


def report(job: EvalJob, rows: list[Row], wall_ms: float, orchestration: dict) -> tuple[Report, str]:
    """Summarise the rows, check the gates and write the report atomically; the report and its path.

    ``orchestration`` holds the report's ``orchestrator`` and its reason and alternative.
    """
    run, workspace = _opened(job)
    corpus = workspace.corpus
    try:
        built = assemble_report(job, rows, wall_ms=wall_ms, corpus_fingerprint=corpus.fingerprint,
                                page_fingerprints=page_fingerprints(corpus),
                                side_file_fingerprints=side_file_fingerprints(corpus), ahead=run.scored,
                                **orchestration)
    finally:
        run.scored.clear()
    if job.variant is not None:  # one column of a run of several: written with the others
        return built, ""
    path = write_report(built, job.out or f"{job.config.reports_dir}/{built.run_id}.json")
    if not job.out:  # a report written where the user chose is not one of the folder's runs
        from docpilot.history.index import record_run

        record_run(path, built)  # a miss is caught up by the next reader of the folder
    return built, str(path)
