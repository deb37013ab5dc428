"""The stages of an eval as functions of a job and a shard: what inline, Prefect and Dask runs all call.

Each unpacks the job and calls one ``pipeline`` function over the shard. Run inline,
they are called as they are; under Prefect, ``tasks`` wraps each in a task, unchanged,
so both orchestrators run the same code and give the same rows.
"""

from __future__ import annotations

from docpilot.reports.changes import page_fingerprints, side_file_fingerprints
from docpilot.reports.report import assemble_report, write_report
from docpilot.run import pipeline, progress
from docpilot.run.job import EvalJob
from docpilot.run.lane import Interrupted
from docpilot.run.workspace import Trace, Workspace, open_workspace
from docpilot.schema import Report, Row
from metrics.summary import Ahead

# The rows scored so far in this process, with their metric values: the report's summary
# reads them rather than working every row out after the model's last answer.
_scored = Ahead()


def _workspace(job: EvalJob) -> Workspace:
    # The corpus the run started with, here and on a worker: ranking other docs would
    # store results under keys they do not belong to.
    return open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint)


def look_up_rankings(job: EvalJob, traces: list[Trace]) -> list[int]:
    """Fill in a shard's cached rankings, in the calling process; the positions still to rank."""
    todo = pipeline.lookup_rankings(_workspace(job), traces, refresh="retrieve" in job.refresh)
    progress.advance("retrieve", len(traces) - len(todo))
    return todo


def retrieve(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Rank sections for every record of the shard (and store the rankings when the job caches)."""
    return pipeline.rank_shard(_workspace(job), traces)


def prime(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Build a shard's prompts and apply the retrieval gate."""
    return pipeline.prime_shard(_workspace(job), traces)


def look_up_turns(job: EvalJob, traces: list[Trace]) -> list[int]:
    """Fill in a primed shard's cached turns, in the calling process; the positions still to answer."""
    todo = pipeline.lookup_turns(_workspace(job), traces, refresh="model" in job.refresh)
    progress.advance("model", len(traces) - len(todo))
    return todo


def model(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Answer the shard's records that have no turn yet, concurrently and bounded; faults mark records."""
    try:
        return pipeline.answer_shard(_workspace(job), traces)
    except Interrupted:
        # The run is stopping (Ctrl-C, SIGTERM) and nobody will read this shard: the turns
        # answered so far are stored. Raising would only print a traceback.
        return traces


def answer_ahead(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Answer turns ahead of the run's own model stage (``wiring.leading``), which counts them and waits for them."""
    try:
        return pipeline.answer_shard(_workspace(job), traces, counted=False)
    except Interrupted:
        return traces


def lane_held(job: EvalJob):
    """A context that keeps the run's model lane open (and what it answered) for its duration."""
    return pipeline.lane_held(_workspace(job))


def remote(job: EvalJob, traces: list[Trace]) -> list[Trace]:
    """Ask the assistant's HTTP server a shard's questions: retrieve, prime and model, over the network."""
    from docpilot.run.remote import remote_shard

    traces, stages = remote_shard(_workspace(job), traces, job.url, concurrency=job.config.model.concurrency)
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

    rows = pipeline.build_rows(traces, corpus_language=corpus_language(_workspace(job).corpus), model=job.config.model)
    _scored.add(rows)
    return rows


def forget_scores() -> None:
    """Let go of the rows scored so far (a run starts, or its report is made)."""
    _scored.clear()


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
    corpus = _workspace(job).corpus
    try:
        built = assemble_report(job, rows, wall_ms=wall_ms, corpus_fingerprint=corpus.fingerprint,
                                page_fingerprints=page_fingerprints(corpus),
                                side_file_fingerprints=side_file_fingerprints(corpus), ahead=_scored, **orchestration)
    finally:
        forget_scores()
    path = write_report(built, job.out or f"{job.config.reports_dir}/{built.run_id}.json")
    if not job.out:  # a report written where the user chose is not one of the folder's runs
        from docpilot.history.index import record_run

        record_run(path, built)  # a miss is caught up by the next reader of the folder
    return built, str(path)
