"""One eval from start to report: ``evaluate(job) -> Report``, for the CLI, the Prefect flow and Python callers.

``evaluate`` opens the run (its ``RunContext``: workspace, model lane, scores so far),
cuts the job's records into shards and hands them to an *executor*, which sends each
shard down the road (``run.road.travel``) where and as many at once as it chooses:

- ``inline`` (the default): ``SHARDS_AT_ONCE`` shards on threads of this process, so the
  next shard is ranked while the model answers the one before; the run's model lane
  keeps ``model.concurrency`` turns in flight across them;
- ``flows.eval``: a Prefect task run per shard; ``flows.dask``: a shard per Dask task, on
  the cluster's workers;
- a run of several variants (``variants``): each variant's run inline, all at once, on
  threads of this process, sharing the docs, the index and each retrieval setting's
  rankings (``run.variants``).

Then the rows are summarised, the gates checked and the report written; the report
knows its path (``Report.path``). How the process ends and what Ctrl-C prints are the
CLI's business; the core never imports an orchestrator.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

from docpilot import progress as progress_module
from docpilot.errors import OrchestratorError
from docpilot.progress import Progress, current
from docpilot.run.context import RunContext
from docpilot.run.job import EvalJob, job_records, shards
from docpilot.run.lane import Interrupted
from docpilot.run.orchestrator import Orchestration, choose
from docpilot.run.road import travel
from docpilot.telemetry.settings import tracing_settings

if TYPE_CHECKING:
    from docpilot.config.variants import Variant
    from docpilot.run.variants import SharedRanking
    from docpilot.schema import Report, Row

Executor = Callable[[RunContext, Iterator[list]], Iterable[list["Row"]]]
"""Sends each shard of a run down the road (``travel(run, shard)``) and yields each shard's rows, in shard order."""

SHARDS_AT_ONCE = 3
"""Shards an inline run has on the road at once: one being answered, the next ones ranked and primed, so
the model lane never runs dry at a shard's end (one shard at a time left the lane idle while the next was
ranked; two ahead kept ``model.concurrency`` turns in flight through the language model's first load)."""


def evaluate(
    job: EvalJob,
    *,
    variants: Sequence[Variant] = (),
    gate_variant: str | None = None,
    progress: Progress | None = None,
    orchestration: Orchestration | None = None,
    executor: Executor | None = None,
    interrupt: threading.Event | None = None,
) -> Report:
    """Run the eval ``job`` describes, write its report and return it (``report.path`` says where).

    ``variants`` run side by side and their reports are joined into one (``gate_variant``:
    the verdict reads that variant's gates only). ``progress`` counts the run's records (by
    default the calling thread's, see ``docpilot.progress``); ``orchestration`` is what the
    report says ran it; ``executor`` sends the shards down the road (by default ``inline``);
    ``interrupt``, when set, stops the run (the command line's signal handler sets it).
    """
    orchestration = orchestration or choose("inline")
    if orchestration.orchestrator != "inline" and executor is None and not variants:
        raise OrchestratorError(f"a run under Prefect ({orchestration.reason}) needs its flow; "
                                "fix: run it through docpilot.flows.eval.run_eval, or choose the inline orchestrator")
    progress = progress or current()
    interrupt = interrupt or threading.Event()
    if variants:
        return _evaluate_variants(job, list(variants), gate_variant, progress, orchestration, interrupt)
    with served(job) as job, _opened(job, progress, interrupt) as run:
        return _run(run, executor or inline, orchestration)


def calls_model(job: EvalJob) -> bool:
    """Whether this process calls the model: not for ``gate_only``, nor when a server is measured."""
    return not job.gate_only and job.runtime != "server"


def inline(run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
    """The inline executor: ``SHARDS_AT_ONCE`` shards on the road at once, on threads of this process."""
    with ThreadPoolExecutor(max_workers=SHARDS_AT_ONCE, thread_name_prefix="docpilot-shard") as pool:
        pending: deque = deque()
        try:
            for shard in shards:
                pending.append(pool.submit(travel, run, shard))
                if len(pending) >= SHARDS_AT_ONCE:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BaseException:
            run.cancel()  # the shards still on the road stop now; the turns answered stay stored
            for future in pending:
                future.cancel()
            raise


@contextlib.contextmanager
def served(job: EvalJob) -> Iterator[EvalJob]:
    """The job itself, or for the server runtime without a URL, the job pointed at a server started for it."""
    if job.runtime != "server" or job.url is not None:
        yield job
        return
    from docpilot.run.reaper import watch_children
    from docpilot.run.remote import local_server

    watch_children()  # the local server (and its workers) go if this process is killed
    with local_server(job.config) as url:
        yield job.model_copy(update={"url": url})


@contextlib.contextmanager
def _opened(job: EvalJob, progress: Progress, interrupt: threading.Event,
            shared_ranking: SharedRanking | None = None) -> Iterator[RunContext]:
    """The run's context for the block: its workspace open, its endpoint not yet asked anything."""
    from docpilot.assistant.workspace import open_workspace

    with progress_module.counting(progress):  # building a missing index counts its chunks
        # The server runtime's ranking is the server's (or the target's): no index opens here.
        workspace = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint,
                                   ranks=job.runtime != "server")
    run = RunContext(job.run_key, job=job, workspace=workspace, progress=progress.shown_as(_stage_labels(job)),
                     interrupt=interrupt, shared_ranking=shared_ranking, endpoint_ready=not calls_model(job))
    try:
        yield run
    except BaseException:
        run.cancel()  # the model stages still waiting return now; answered turns stay stored
        raise
    finally:
        run.close()


def _stage_labels(job: EvalJob) -> dict[str, str]:
    """What the run's stages are shown as: a target is asked, and its replies scored, where DocPilot's
    own assistant retrieves and calls a model (its stages keep their names)."""
    if job.config.target is None:
        return {}
    return {"retrieve": f"ask {job.config.target}", "model": "score"}


def _run(run: RunContext, executor: Executor, orchestration: Orchestration) -> Report:
    """Every shard down the road through ``executor``, then the report."""
    job = run.job
    records = job_records(job)
    run.progress.start("retrieve", len(records))
    if not job.gate_only:
        run.progress.start("model", len(records) * job.config.model.repeat)  # each turn asked model.repeat times
    # Tracing configured: each scored shard sends its spans. Not configured (the usual
    # case): the telemetry code is not even imported.
    traced = tracing_settings(job.config.telemetry) is not None
    if traced:
        from docpilot.telemetry.tracing import prepare_trace

        run.trace = prepare_trace(job.config.telemetry)
    started = time.perf_counter()
    rows: list[Row] = []
    for shard_rows in executor(run, shards(records, job.config.shard_size, first=job.config.model.concurrency)):
        _scored(run, shard_rows)
        rows.extend(shard_rows)
    if run.interrupt.is_set():  # stopped by a signal whose KeyboardInterrupt something on the way swallowed
        raise Interrupted("the run was interrupted; the turns answered so far are stored")
    wall_ms = (time.perf_counter() - started) * 1000
    report_started = time.time()
    report = _report(run, rows, wall_ms, orchestration)
    if traced:  # the run's trace, laid out from the times its rows carry
        from docpilot.telemetry.tracing import trace_run

        trace_run(job.config.telemetry, report, started=report_started - wall_ms / 1000,
                  report_started=report_started, ended=time.time(), trace=run.trace)
    return report


def _scored(run: RunContext, rows: list[Row]) -> None:
    """A shard's rows reached the run: their metric values are worked out, their spans sent, while others travel."""
    if run.job.gate_only:
        return
    run.scored.add(rows)
    if run.trace is not None:
        run.trace.add(rows, gate_only=False, model={"name": run.job.config.model.name})


def _report(run: RunContext, rows: list[Row], wall_ms: float, orchestration: Orchestration) -> Report:
    """Summarise the rows, check the gates and write the report atomically (a variant's is joined, not written)."""
    from docpilot.reports.changes import page_fingerprints, side_file_fingerprints
    from docpilot.reports.report import assemble_report, write_report

    job, corpus = run.job, run.workspace.corpus
    built = assemble_report(job, rows, wall_ms=wall_ms, corpus_fingerprint=corpus.fingerprint,
                            page_fingerprints=page_fingerprints(corpus),
                            side_file_fingerprints=side_file_fingerprints(corpus), ahead=run.scored,
                            **orchestration.report_fields())
    if job.variant is not None:  # one column of a run of several: written with the others
        return built
    path = write_report(built, job.out or f"{job.config.reports_dir}/{built.run_id}.json")
    if not job.out:  # a report written where the user chose is not one of the folder's runs
        from docpilot.history.index import record_run

        record_run(path, built)  # a miss is caught up by the next reader of the folder
    return built.at(str(path))


def _evaluate_variants(job: EvalJob, variants: list[Variant], gate_variant: str | None, progress: Progress,
                       orchestration: Orchestration, interrupt: threading.Event) -> Report:
    """Every variant's run at once, each inline on threads of its own; their joined report, written."""
    from docpilot.reports.report import write_report
    from docpilot.reports.variants import join_variants
    from docpilot.run.variants import Labelled, naming, shared_rankings, variant_jobs

    jobs = variant_jobs(job, variants)
    shared = shared_rankings(jobs)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        runs = [stack.enter_context(_opened(one, Progress(Labelled(progress.sink, one.variant)), interrupt,
                                            shared.get(one.variant or "")))
                for one in jobs]
        with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="docpilot-variant") as pool:
            futures = [pool.submit(_run, run, inline, orchestration) for run in runs]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:  # one variant failed, or Ctrl-C: the others stop too; answered turns stay stored
                if not all(f.done() and f.exception() is None for f in futures):
                    for run in runs:
                        run.cancel()
        # The error of the variant that failed first by itself, not of one stopped because of it.
        errors = [(one.variant or "", f.exception()) for one, f in zip(jobs, futures, strict=True)
                  if f.exception() is not None]
        if errors:
            name, error = ([e for e in errors if not isinstance(e[1], Interrupted)] or errors)[0]
            raise naming(error, name)
        reports = [future.result() for future in futures]
    wall_ms = (time.perf_counter() - started) * 1000
    joined = join_variants(list(zip(variants, reports, strict=True)), gate_variant=gate_variant, wall_ms=wall_ms)
    path = write_report(joined, job.out or f"{job.config.reports_dir}/{joined.run_id}.json")
    return joined.at(str(path))
