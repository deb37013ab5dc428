"""The steps of DocPilot's own assistant over one shard, the way a run calls them, for tests that drive
them by hand: a run's context over a workspace, its retrieve step and its model step."""

from __future__ import annotations

from docpilot.assistant.workspace import Trace, Workspace
from docpilot.run.assistants import OwnAssistant
from docpilot.run.context import RunContext
from docpilot.run.job import EvalJob
from docpilot.run.limiter import Limiter
from docpilot.run.road import lookup_rankings, lookup_turns, rank_shard


def run_for(ws: Workspace, **job) -> RunContext:
    """A run's context over ``ws`` (its config the job's), with DocPilot's own assistant; close it after."""
    config = ws.config
    return RunContext(EvalJob(config=config, golden=config.golden, **job), ws, OwnAssistant(endpoint_ready=True),
                      Limiter(config.model.concurrency))


def retrieve_shard(ws: Workspace, traces: list[Trace], *, refresh: bool = False) -> list[Trace]:
    """Fill in the stored rankings and rank the rest, storing them: the retrieve step of a run."""
    todo = lookup_rankings(ws, traces, refresh=refresh)
    rank_shard(ws, [traces[p] for p in todo])
    return traces


def model_shard(ws: Workspace, traces: list[Trace], run: RunContext | None = None) -> list[Trace]:
    """Fill in the shard's stored turns, then send the rest: the model step of a run.

    Steps given one ``run`` share its model lane, as the shards of a run do; without
    one, the shard has a run of its own, closed (every turn stored) before it returns.
    """
    own = run is None
    run = run or run_for(ws)
    try:
        todo = lookup_turns(ws, traces)
        run.assistant.send_turns(run, [traces[p] for p in todo])
    finally:
        if own:
            run.close()
    return traces


def served_shard(ws: Workspace, traces: list[Trace], url: str, *, token: str | None = None,
                 concurrency: int = 8) -> tuple[list[Trace], dict[str, dict[str, float]]]:
    """Ask a running ``docpilot serve`` every record of a shard, as the server runtime does; the filled traces
    and each record's server stage timings (records whose server sent none are left out)."""
    from docpilot.run.remote import ServedAssistant

    job = EvalJob(config=ws.config, golden=ws.config.golden, runtime="server", url=url)
    run = RunContext(job, ws, ServedAssistant(url, token), Limiter(concurrency))
    try:
        run.assistant.open(run)
        traces = run.assistant.answer(run, traces)
    finally:
        run.close()
    return traces, {t.record.id: t.stages_ms for t in traces if t.stages_ms}
