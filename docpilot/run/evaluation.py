"""One eval from start to report: ``evaluate(job, executor) -> Report``, the one way into an eval.

``evaluate`` opens the run (its ``RunContext``: workspace, assistant, limiter, scores so
far), cuts the job's records into shards and hands them to an *executor*, which sends
each shard down the road (``run.road.travel``) where and as many at once as it chooses:

- ``Inline`` (the default): ``SHARDS_AT_ONCE`` shards on threads of this process, so the
  next shard is ranked while the model answers the one before; the run's limiter keeps
  ``model.concurrency`` questions in flight across them;
- ``flows.eval.PrefectExecutor``: the run inside the eval flow, a Prefect task run per
  shard, in this process or on a Dask cluster's workers;
- a run of several variants: each variant's run inline, all at once, on threads of this
  process, sharing the docs, the index and each retrieval setting's rankings
  (``run.variants``).

The planner (``flows.plan``) chooses the executor from the user's options. Then the
rows are summarised, the gates checked and the report written; the report knows its
path (``Report.path``). How the process ends and what Ctrl-C prints are the CLI's
business; the core never imports an orchestrator.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from docpilot import progress as progress_module
from docpilot.progress import Progress, current
from docpilot.run.assistants import assistant_for
from docpilot.run.context import RunContext
from docpilot.run.job import EvalJob, job_records, shards
from docpilot.run.limiter import Interrupted, Limiter
from docpilot.run.orchestrator import Orchestration, choose
from docpilot.run.road import travel
from docpilot.telemetry.settings import tracing_settings

if TYPE_CHECKING:
    from docpilot.config.variants import Variant
    from docpilot.run.variants import SharedRanking
    from docpilot.schema import Report, Row

SHARDS_AT_ONCE = 3
"""Shards an inline run has on the road at once: one being answered, the next ones ranked and primed, so
the model never runs dry at a shard's end."""


class Executor(Protocol):
    """Where a run runs (``around``) and where each of its shards travels (``shards``)."""

    orchestration: Orchestration
    """What the report says ran it."""

    def around(self, job: EvalJob, body: Callable[[], Report]) -> Report:
        """Run ``body``, the whole run, where the executor runs runs (inside a Prefect flow, say)."""
        ...

    def shards(self, run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
        """Send each shard down the road (``travel(run, shard)``) and yield each shard's rows, in shard order."""
        ...


@dataclass(frozen=True)
class Inline:
    """The inline executor: the run in this process, ``SHARDS_AT_ONCE`` shards on the road at once on threads."""

    orchestration: Orchestration = field(default_factory=lambda: choose("inline"))

    def around(self, job: EvalJob, body: Callable[[], Report]) -> Report:
        return body()

    def shards(self, run: RunContext, shards: Iterator[list]) -> Iterator[list[Row]]:
        with ThreadPoolExecutor(max_workers=SHARDS_AT_ONCE, thread_name_prefix="docpilot-shard") as pool:
            yield from in_order(run, shards, lambda shard: pool.submit(travel, run, shard),
                                settle=lambda future: future.cancel())


def in_order(run: RunContext, shards: Iterator[list], submit: Callable[[list], Any],
             *, settle: Callable[[Any], object]) -> Iterator[list[Row]]:
    """Each shard started by ``submit`` (a future of its rows), ``SHARDS_AT_ONCE`` on the road at once; their rows
    in shard order. When one fails (or the run is stopped) the run is cancelled, each shard still pending is
    settled by ``settle`` (cancelled, or waited for), and the error goes on; the turns answered stay stored."""
    pending: deque = deque()
    try:
        for shard in shards:
            pending.append(submit(shard))
            if len(pending) >= SHARDS_AT_ONCE:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BaseException:
        run.cancel()
        for future in pending:
            settle(future)
        raise


def evaluate(
    job: EvalJob,
    executor: Executor | None = None,
    *,
    variants: Sequence[Variant] = (),
    gate_variant: str | None = None,
    progress: Progress | None = None,
    interrupt: threading.Event | None = None,
) -> Report:
    """Run the eval ``job`` describes, write its report and return it (``report.path`` says where).

    ``executor`` is where it runs (``flows.plan.plan`` chooses; by default ``Inline``).
    ``variants`` run side by side, inline, and their reports are joined into one
    (``gate_variant``: the verdict reads that variant's gates only). ``progress`` counts
    the run's records (by default the calling thread's, see ``docpilot.progress``);
    ``interrupt``, when set, stops the run (the command line's signal handler sets it).
    """
    executor = executor or Inline()
    progress = progress or current()
    interrupt = interrupt or threading.Event()
    if variants:
        return executor.around(job, lambda: _evaluate_variants(job, list(variants), gate_variant, progress,
                                                               executor, interrupt))

    def run() -> Report:
        with _opened(job, progress, interrupt) as opened:
            return _run(opened, executor)

    return executor.around(job, run)


@contextlib.contextmanager
def _opened(job: EvalJob, progress: Progress, interrupt: threading.Event,
            shared_ranking: SharedRanking | None = None) -> Iterator[RunContext]:
    """The run's context for the block: its workspace open, its assistant ready to be asked."""
    from docpilot.assistant.workspace import open_workspace

    assistant = assistant_for(job, shared_ranking)
    with progress_module.counting(progress):  # building a missing index counts its chunks
        # An assistant that ranks elsewhere (a server, a target) needs no index here.
        workspace = open_workspace(job.config, use_cache=job.use_cache, fingerprint=job.corpus_fingerprint,
                                   ranks=assistant.ranks_here)
    run = RunContext(job, workspace, assistant, Limiter(job.config.model.concurrency),
                     progress=progress.shown_as(assistant.stage_labels), interrupt=interrupt)
    try:
        assistant.open(run)
        yield run
    except BaseException:
        run.cancel()  # the questions still in flight are dropped; answered turns stay stored
        raise
    finally:
        run.close()


def _run(run: RunContext, executor: Executor) -> Report:
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
    for shard_rows in executor.shards(run, shards(records, job.config.shard_size, first=job.config.model.concurrency)):
        _scored(run, shard_rows)
        rows.extend(shard_rows)
    if run.interrupt.is_set():  # stopped by a signal whose KeyboardInterrupt something on the way swallowed
        raise Interrupted("the run was interrupted; the turns answered so far are stored")
    wall_ms = (time.perf_counter() - started) * 1000
    report_started = time.time()
    report = _report(run, rows, wall_ms, executor.orchestration)
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
                       executor: Executor, interrupt: threading.Event) -> Report:
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
            futures = [pool.submit(_run, run, executor) for run in runs]
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
