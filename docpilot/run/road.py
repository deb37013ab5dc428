"""The road: a shard of records through look up → retrieve → prime → model → render → score → store, written once.

``travel`` is the only place the stage order is written. Every way of running an eval
calls it, one shard at a time: inline on a few threads of this process
(``run.evaluation``), a Prefect task run per shard (``flows.eval``), a Dask worker per
shard (``flows.dask``), each variant of a run on threads of its own. They decide where
and how many shards travel at once, never the order of the steps.

Each expensive step looks its records up in the stage cache first and stores what it
computes as soon as it exists (a ranking with its shard, a turn the moment it arrives),
so a crash loses no finished model call and a re-run computes only what changed. A
turn is sent to a model in one function (``send_turns``): the model endpoint is
probed then, by the first turn of the run, so a run with every turn stored sends no
request at all. The server runtime asks a running DocPilot server instead
(``ask_server``), which retrieves, primes and answers on its side.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from docpilot import progress
from docpilot.assistant.workspace import Trace
from docpilot.golden.gold_state import gold_states
from docpilot.run import pipeline
from docpilot.run.context import RunContext
from docpilot.run.lane import Interrupted
from docpilot.schema import AttackProbe, GoldenRecord, Row


def travel(run: RunContext, records: Sequence[GoldenRecord | AttackProbe]) -> list[Row]:
    """Take one shard of the run's records down the road; their report rows, scored."""
    _check_running(run)
    traces = pipeline.start_traces(records)
    if run.job.runtime == "server":
        traces = ask_server(run, traces)
        if run.job.gate_only:
            return _score(run, traces)  # a target's search endpoint: a ranking, no answer to render
    else:
        traces = _retrieve(run, traces)
        if run.job.gate_only:
            return _score(run, traces)
        traces = _prime(run, traces)
        traces = _answer(run, traces)
    return _score(run, _render(run, traces))


def _retrieve(run: RunContext, traces: list[Trace]) -> list[Trace]:
    """Fill in the stored rankings, rank the rest and store them.

    A variant whose retrieval setting another variant ranks (``run.variants.SharedRanking``)
    waits for that one's rankings of the shard, and finds them stored.
    """
    ws, shared = run.workspace, run.shared_ranking
    ranks = shared is None or shared.owner == (run.job.variant or "")
    if not ranks:
        shared.wait([t.record.id for t in traces], run.interrupt)
        _check_running(run)
    todo = pipeline.lookup_rankings(ws, traces, refresh=ranks and "retrieve" in run.job.refresh)
    run.progress.advance("retrieve", len(traces) - len(todo))
    with progress.counting(run.progress):
        pipeline.rank_shard(ws, [traces[p] for p in todo])
    if shared is not None and ranks:
        shared.computed.update(traces[p].record.id for p in todo)
        shared.ranked([t.record.id for t in traces])
    return traces


def _prime(run: RunContext, traces: list[Trace]) -> list[Trace]:
    """Build each record's prompt from its top sections, and apply the retrieval gate."""
    return pipeline.prime_shard(run.workspace, traces)


def _answer(run: RunContext, traces: list[Trace]) -> list[Trace]:
    """Fill in the stored turns, and send the others to the model: ``model.repeat`` samples of each."""
    repeat = run.job.config.model.repeat
    unasked = sum(1 for t in traces if t.gate_refused or t.prompt is None)  # one row, counted as its samples
    traces = pipeline.sample_traces(traces, repeat)
    todo = pipeline.lookup_turns(run.workspace, traces, refresh="model" in run.job.refresh)
    run.progress.advance("model", len(traces) - len(todo) + unasked * (repeat - 1))
    _check_running(run)
    send_turns(run, [traces[p] for p in todo])
    return traces


def send_turns(run: RunContext, traces: list[Trace]) -> None:
    """Send primed traces to the run's model and wait for their turns, each stored as it arrives.

    The one place a turn leaves the run: through the run's model lane, which keeps
    ``model.concurrency`` turns in flight across the shards travelling at once, and
    which probes the endpoint before the first of them (``RunContext.model_settings``).
    """
    if traces:
        pipeline.answer_shard(run.workspace, traces, run=run)


def ask_server(run: RunContext, traces: list[Trace]) -> list[Trace]:
    """The server runtime's retrieve, prime and model: each record asked of a running DocPilot server.

    Nothing is cached: what is measured is the server, network included. The server's
    own stage timings (embed, retrieve, model) become each row's ``stages_ms``. With
    ``model.repeat`` above 1 the shard is asked that many times over, a sample per round
    (the server retrieves each time: its retrieval is part of what is measured), and the
    samples come back record by record.
    """
    from docpilot.run.remote import remote_shard

    traceparent = run.trace.traceparent if run.trace is not None else None  # the server's turns join the run's trace
    concurrency = run.job.config.model.concurrency
    with run.lock:
        if run.asking is None:
            run.asking = threading.BoundedSemaphore(concurrency)
    repeat = 1 if run.job.gate_only else run.job.config.model.repeat
    rounds = [traces] if repeat == 1 else [_sampled(traces, s) for s in range(repeat)]
    for asked in rounds:
        _, stages = remote_shard(run.workspace, asked, run.job.url, concurrency=concurrency,
                                 traceparent=traceparent, slots=run.asking, first=run.first_reply,
                                 search=run.job.gate_only)  # fills in the traces it is given
        for trace in asked:
            trace.stages_ms = stages.get(trace.record.id, {})
        if not run.job.gate_only:
            run.progress.advance("model", len(asked))
    run.progress.advance("retrieve", len(traces))
    return [trace for samples in zip(*rounds, strict=True) for trace in samples]


def _sampled(traces: list[Trace], sample: int) -> list[Trace]:
    """Fresh traces of the shard's records, as sample ``sample`` of each."""
    fresh = pipeline.start_traces([trace.attack or trace.record for trace in traces])
    for trace in fresh:
        trace.sample = sample
    return fresh


def _render(run: RunContext, traces: list[Trace]) -> list[Trace]:
    """Render every answer into the reader's panel."""
    return pipeline.render_shard(run.workspace, traces)


def _score(run: RunContext, traces: list[Trace]) -> list[Row]:
    """One report row per trace, with what the metrics read, and its gold's state by the set's lock."""
    meter = run.workspace.bias
    stale = (gold_states(run.job.golden, [t.record for t in traces], run.workspace.corpus)
             if run.job.set == "golden" else None)  # a set without a lock: one stat
    if run.job.gate_only:
        return pipeline.build_rows(traces, gate_only=True, meter=meter, gold_states=stale)
    from docpilot.assistant.language import corpus_language

    return pipeline.build_rows(traces, corpus_language=corpus_language(run.workspace.corpus),
                               model=run.job.config.model, meter=meter, gold_states=stale)


def _check_running(run: RunContext) -> None:
    if run.interrupt.is_set():
        raise Interrupted("the run was interrupted; the turns answered so far are stored")
