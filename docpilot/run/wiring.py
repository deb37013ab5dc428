"""The order of an eval's stages over its shards, written once for inline, Prefect and Dask runs.

retrieve → prime → model → render → score, then the report. An ``Executor`` says how
a stage is called: inline, the stage functions of ``docpilot.run.stages`` are called
directly; under Prefect, ``flows`` hands in the same functions wrapped as tasks; on
Dask, ranking and answering are sent to worker processes. The cache is read here,
before anything is sent, so a shard whose results are all stored sends no task, and a
stage that ran in another process (with no cache there) has its results stored here.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import itertools
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpilot.errors import ConfigError
from docpilot.run import stages
from docpilot.run.context import RunContext, context_of
from docpilot.run.job import EvalJob, job_records, shards
from docpilot.run.lane import Interrupted
from docpilot.run.orchestrator import Orchestration
from docpilot.run.pipeline import start_traces
from docpilot.assistant.workspace import Trace
from docpilot.schema import Report
from docpilot.telemetry.settings import tracing_settings

if TYPE_CHECKING:
    from docpilot.models.probe import Ready

LOOKAHEAD = 2
"""Model stages sent ahead of the one being finished, in a run on this machine.

Finishing a shard can stall: the first shard's rows wait for the language model,
which loads in the background for a second or more while the first turns are out.
With two shards queued behind it the lane keeps ``model.concurrency`` turns in flight
through that wait; with one, it ran dry (measured in fresh processes, alternately, on
a busy machine: 1,000 turns × 200 ms at 32 took 7.0–8.2 s of stages with one, 6.83–6.85 s
with two). Ranking and
priming the second and third shard at the start take a few hundred milliseconds of
this thread while the first turns are already out."""

UNBOUNDED = 1 << 30
"""An executor's "ahead" that sends every shard before waiting for any (Dask)."""


@dataclass(frozen=True)
class Executor:
    """How the stages are called; the order they are called in is ``run_stages``'s."""

    call: Callable[..., Any]
    """``call(stage, *args)``: run a stage and return its result."""
    send: Callable[..., Any]
    """``send(stage, job, traces)``: start ranking or answering, return a future (``.result()``)."""
    ranking_ahead: int = 0
    """Shards whose ranking may be under way before the oldest is primed (0: rank, then prime)."""
    answering_ahead: int = LOOKAHEAD
    """Shards whose answering may be under way before the oldest is rendered."""
    remote: bool = False
    """Ranking and answering run in other processes, without a cache: store what comes back here."""


def run_stages(job: EvalJob, executor: Executor, orchestration: Orchestration) -> tuple[Report, str]:
    """Run every stage over every shard, then score and write the report; the report and its path."""
    run = context_of(job)
    lead = None if executor.remote else run.take_lead(job)
    start = lead.started if lead is not None else time.perf_counter()  # the stages' time includes the lead's
    # Tracing configured: OpenTelemetry loads while the run goes on, and each scored shard sends its spans.
    # Not configured (the usual case): the telemetry code is not even imported.
    traced = tracing_settings(job.config.telemetry) is not None
    if traced:
        from docpilot.telemetry.tracing import prepare_trace

        run.trace = prepare_trace(job.config.telemetry)
    # What exists now (imports, the corpus, the index) lives for the whole run; frozen, the
    # garbage collector stops walking it again and again. The run's own objects are many
    # and short-lived: young-generation passes come less often, each over more objects,
    # which costs less in all. Both are undone at the end.
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
    try:
        rows = _rows(run, job, executor, lead)
        if run.interrupt.is_set():  # stopped by a signal whose KeyboardInterrupt something on the way swallowed
            raise Interrupted("the run was interrupted; the turns answered so far are stored")
        wall_ms = (time.perf_counter() - start) * 1000
        report_started = time.time()
        report, path = executor.call(stages.report, job, rows, wall_ms, orchestration.report_fields())
        if traced:  # the run's trace, laid out from the times its rows carry
            from docpilot.telemetry.tracing import trace_run

            trace_run(job.config.telemetry, report, started=report_started - wall_ms / 1000,
                      report_started=report_started, ended=time.time(), trace=run.trace)
        return report, path
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


@dataclass
class _Sent:
    """A shard whose missing rankings or turns were sent: the shard, their positions, the future."""

    traces: list[Trace]
    todo: list[int]
    future: Any
    ahead: list[int] | None = None
    """For the lead shard: the positions whose turns it sent ahead (the model stage asks for these)."""


@dataclass
class Lead:
    """The run's first shards, ranked, primed and with their turns sent before the orchestrator is up."""

    job: EvalJob
    shards: list[tuple[list[Trace], list[int], list[int]]]
    """Each shard's traces, the positions it ranked (the others' rankings were stored), and the
    positions it handed to the model lane (the others had stored turns, or no prompt to send)."""
    started: float
    """``time.perf_counter()`` when the lead began: the run's stages started then."""


@contextlib.contextmanager
def leading(job: EvalJob, ready: Ready | None = None) -> Iterator[EvalJob]:
    """Send the run's first turns now, and let the run that follows in the block take them up; yields its job.

    Before a run's first turn, the model endpoint must have answered its probe, and an
    orchestrator may take a second or more to get going (Prefect: its import, the flow
    run): the model would wait for both. So the run's first ``LOOKAHEAD`` shards (a
    round of ``model.concurrency`` records, then a full shard) are ranked and primed
    here, in this thread: the first while the probe is out, after which ``ready()``
    (``models.probe``) waits for the endpoint and gives the config to run with. Each
    shard's turns then go to the process's model lane on a thread of their own.

    When the run in the block reaches those shards, it takes their rankings as they are
    (each question is embedded once per run: a dense or hybrid ranking pays the embedder
    for it), primes them again as a stage of its own (the same prompts, in a
    milliseconds), and its model stage waits for the turns in flight: the lane sends a
    prompt once. So those shards have no retrieve task run of their own under Prefect,
    as a shard whose rankings are all stored has none. A run whose turns are all stored calls no
    model: it does not start the local provider's server, and goes on when the endpoint
    cannot answer (see ``_ready_unless_all_stored``). Only for stages that run in this
    process (not Dask, not the server runtime) and for runs that call the model; any
    other run gets its job and no lead (a Dask run: ``checked_unless_all_stored``).
    """
    records = job_records(job)
    if job.gate_only or job.runtime == "server" or not records:
        yield _ready(job, ready)
        return
    run = context_of(job)
    started = time.perf_counter()
    lead = Lead(job, [], started)
    run_job: EvalJob | None = None  # the job with the endpoint checked, once a turn is to be sent
    with contextlib.ExitStack() as held, ThreadPoolExecutor(max_workers=LOOKAHEAD,
                                                           thread_name_prefix="docpilot-lead") as pool:
        answering = []
        run_shards = shards(records, job.config.shard_size, first=job.config.model.concurrency)
        try:
            for shard in itertools.islice(run_shards, LOOKAHEAD):
                traces = start_traces(shard)
                with run.progress.muted():  # the run's own stages count these records
                    ranked = stages.look_up_rankings(job, traces)
                    for position, trace in zip(ranked, stages.retrieve(job, [traces[p] for p in ranked]), strict=True):
                        traces[position] = trace
                    traces = stages.prime(job, traces)
                    sent = stages.look_up_turns(job, traces)
                if sent and run_job is None:  # the first turns are ready to go: wait for the endpoint
                    run_job = _ready(job, ready)
                    # Open until the run is done, so that it finds every turn the lead answered.
                    held.enter_context(stages.lane_held(run_job))
                if sent:
                    # Copies: the turns land on the lead's own traces, and the run's model stage
                    # gets them from the lane (and counts them) like any other turn.
                    answering.append(pool.submit(stages.answer_ahead, run_job,
                                                 [copy.copy(traces[p]) for p in sent]))
                lead.shards.append((traces, ranked, sent))
            if run_job is None:  # nothing in the lead needs the model
                covered = sum(len(traces) for traces, _, _ in lead.shards) == len(records)
                run_job = job if covered else _ready_unless_all_stored(job, ready, run_shards)
            lead.job = run_job
            with run.lock:
                run.lead = lead  # taken by the run's first shards
            yield run_job
        except BaseException:
            run.cancel()  # the lead's turns still out return now; those answered stay stored
            raise
        finally:
            with run.lock:
                run.lead = None
    for future in answering:
        future.result()  # its turns are stored by now; a failure there is the run's own


def checked_unless_all_stored(job: EvalJob, ready: Ready | None) -> EvalJob:
    """The job of a run without a lead (on Dask): its endpoint checked, unless no record needs one.

    The rule that follows a lead that sent no turn (``_ready_unless_all_stored``), over
    every record: a re-run whose turns are all stored starts no local server, and goes
    on when the endpoint cannot answer, as the same run does in this process.
    """
    records = job_records(job)
    if job.gate_only or job.runtime == "server" or not records:
        return _ready(job, ready)
    return _ready_unless_all_stored(job, ready, shards(records, job.config.shard_size))


def _ready_unless_all_stored(job: EvalJob, ready: Ready | None, rest: Iterator[list]) -> EvalJob:
    """The job to run after a lead that sent no turn: with its endpoint checked, or as it is when no record needs one.

    The other records are looked up in the cache before the endpoint is asked for only
    when asking would cost more than the look-up (the local provider's server is still
    to start: seconds, and a gigabyte of memory), and after it when the endpoint cannot
    serve the run: a run with every turn stored then re-scores them and calls no model.
    Otherwise the probe, sent when the run began, has usually answered by now, and
    looking up a long golden set twice would cost more than it saves.
    """
    if ready is None:
        return job
    looked_up = ready.costly()
    if looked_up and _all_turns_stored(job, rest):
        return job
    try:
        return _ready(job, ready)
    except ConfigError as error:
        if looked_up or not _all_turns_stored(job, rest):
            raise
        reason = str(error).split("\n", 1)[0]
        print(f"warning: {reason}; every turn is in the cache, so the run goes on without it", file=sys.stderr)
        return job


def _all_turns_stored(job: EvalJob, rest: Iterator[list]) -> bool:
    """Whether every record of these shards has its ranking and its turn stored (or sends no turn).

    Reads the cache the way the run's own stages will, one shard at a time, and stops at
    the first record with something to compute (a ranking, or a turn to send).
    """
    run = context_of(job)
    for shard in rest:
        traces = start_traces(shard)
        with run.progress.muted():  # the run's own stages count these records
            if stages.look_up_rankings(job, traces):
                return False  # a record to rank, and then perhaps to answer
            if stages.look_up_turns(job, stages.prime(job, traces)):
                return False
    return True


def _ready(job: EvalJob, ready: Ready | None) -> EvalJob:
    return job if ready is None else job.model_copy(update={"config": ready()})


def _rows(run: RunContext, job: EvalJob, executor: Executor, lead: Lead | None) -> list:
    records = job_records(job)
    progress = run.progress
    for stage in ("retrieve",) if job.gate_only else ("retrieve", "model"):
        progress.start(stage, len(records))
    call = executor.call
    # Stages sent to other processes run without a cache; this process reads and writes it.
    worker_job = job.model_copy(update={"use_cache": False, "refresh": []}) if executor.remote else job
    rows: list = []
    ranking: deque[_Sent] = deque()
    answering: deque[_Sent] = deque()

    def send(stage, traces: list[Trace], todo: list[int]) -> _Sent:
        if not todo:
            return _Sent(traces, todo, completed([]))  # every result is stored: no task
        return _Sent(traces, todo, executor.send(stage, worker_job, [traces[p] for p in todo]))

    def received(sent: _Sent, stage: str) -> list[Trace]:
        computed = sent.future.result()
        if executor.remote:
            stages.store(job, stage, computed)
            progress.advance(stage, len(computed))
        for position, trace in zip(sent.todo, computed, strict=True):
            sent.traces[position] = trace
        return sent.traces

    def finish_answering() -> None:
        traces = call(stages.render, job, received(answering.popleft(), "model"))
        rows.extend(call(stages.score, job, traces))

    def prime_and_answer() -> None:
        ranked = ranking.popleft()
        traces = received(ranked, "retrieve")
        if job.gate_only:
            rows.extend(call(stages.score, job, traces))
            return
        traces = call(stages.prime, job, traces)
        if ranked.ahead is None:
            todo = stages.look_up_turns(job, traces)
        else:  # the lead's: its stored turns are filled in, the rest are in flight
            todo = ranked.ahead
            progress.advance("model", len(traces) - len(todo))
        answering.append(send(stages.model, traces, todo))
        while len(answering) > executor.answering_ahead:
            finish_answering()

    try:
        # A first shard of one round of turns gets the model going while the rest are ranked.
        first = None if job.gate_only else job.config.model.concurrency
        for index, shard in enumerate(shards(records, job.config.shard_size, first=first)):
            # Ranked, primed and being answered already; only as the same records (a lead cut with
            # other settings would leave records out): any other shard is the run's own work.
            if lead is not None and index < len(lead.shards) \
                    and [t.record.id for t in lead.shards[index][0]] == [r.id for r in shard]:
                traces, _, sent = lead.shards[index]
                # The lead's rankings are this run's: ranking again would embed each question
                # twice, and a paid embedder bills each time. The lead counted none of them.
                progress.advance("retrieve", len(traces))
                ranking.append(_Sent(traces, [], completed([]), ahead=sent))
                while len(ranking) > executor.ranking_ahead:
                    prime_and_answer()
                continue
            traces = start_traces(shard)
            if job.runtime == "server":
                traces = call(stages.remote, job, traces)
                rows.extend(call(stages.score, job, call(stages.render, job, traces)))
                continue
            ranking.append(send(stages.retrieve, traces, stages.look_up_rankings(job, traces)))
            while len(ranking) > executor.ranking_ahead:
                prime_and_answer()
        while ranking:
            prime_and_answer()
        while answering:
            finish_answering()
    except BaseException:
        run.cancel()  # the model stages still waiting return now; answered turns stay stored
        raise
    return rows


def completed(result) -> Future:
    """A future that already holds ``result``: a stage that ran at once, or had nothing to do."""
    done: Future = Future()
    done.set_result(result)
    return done


def _call(stage, *args):
    return stage(*args)


@contextlib.contextmanager
def served(job: EvalJob) -> Iterator[EvalJob]:
    """The job itself, or for the server runtime without a URL, the job pointed at a server started for it."""
    if job.runtime != "server" or job.url is not None:
        yield job
        return
    from docpilot.run.remote import local_server

    with local_server(job.config) as url:
        yield job.model_copy(update={"url": url})


def run_inline(job: EvalJob, orchestration: Orchestration) -> tuple[Report, str]:
    """Run the eval in this process with no orchestrator: the stage functions called directly."""
    with served(job) as job, ThreadPoolExecutor(max_workers=LOOKAHEAD + 1,
                                                  thread_name_prefix="docpilot-stage") as pool:

        def send(stage, job, traces):
            if stage is stages.model:  # answering overlaps the next shard's ranking
                return pool.submit(stage, job, traces)
            return completed(stage(job, traces))

        return run_stages(job, Executor(call=_call, send=send), orchestration)
