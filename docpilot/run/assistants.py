"""Who answers a run's questions: DocPilot's own assistant here, DocPilot's server, or a target.

The road (``run.road.travel``) asks an ``Assistant`` for each shard's rankings
(``rank``, for ``--gate-only``) or for its rankings, prompts and turns (``answer``),
then renders and scores what came back the same way whoever answered. The planner
(``assistant_for``, below) chooses the assistant once, from the job; each owns its
clients and its state for the run and sends every question through the run's one
limiter (``run.limiter``), on the run's one event loop:

- ``OwnAssistant``: retrieve, prime and the model stage in this process, each looked up
  in the stage cache first and stored as soon as it exists; turns go to the model
  through the run's model lane (``run.lane``), which reads the run's first reply
  strictly (``models.probe.fault_of``);
- ``ServedAssistant`` (``run.remote``): each question asked of a running ``docpilot serve``
  (started for the run when no URL is given), which retrieves, primes and answers on its
  side; nothing is cached, what is measured is the server, network included;
- ``TargetAssistant`` (``run.remote``): each question asked of another assistant's HTTP
  API, configured under ``targets:``, its first reply read strictly.

The two asked over HTTP live with their HTTP client (``run.remote``), which a run of
DocPilot's own assistant never imports.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from docpilot import progress
from docpilot.run import road
from docpilot.run.context import Assistant, RunContext
from docpilot.run.lane import Interrupted, ModelLane

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Trace
    from docpilot.config.model import ModelConfig
    from docpilot.run.job import EvalJob
    from docpilot.run.variants import SharedRanking


class OwnAssistant(Assistant):
    """DocPilot's own assistant, in this process: retrieve, prime and the model stage, cached per record."""

    ranks_here = True

    def __init__(self, shared_ranking: SharedRanking | None = None, *, endpoint_ready: bool = False) -> None:
        self.shared_ranking = shared_ranking
        """For a variant whose retrieval setting others share: the first of them ranks, the others wait for
        its rankings, so the variants rank each record once (``run.variants``)."""
        self._endpoint_ready = endpoint_ready
        self._settings: ModelConfig | None = None
        self._lane: ModelLane | None = None
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()

    def rank(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        """Fill in the stored rankings, rank the rest and store them.

        A variant whose retrieval setting another variant ranks waits for that one's
        rankings of the shard, and finds them stored.
        """
        ws, shared = run.workspace, self.shared_ranking
        self._rewrite_follow_ups(run, traces)
        ranks = shared is None or shared.owner == (run.job.variant or "")
        if not ranks:
            shared.wait([t.record.id for t in traces], run.interrupt)
            road.check_running(run)
        todo = road.lookup_rankings(ws, traces, refresh=ranks and "retrieve" in run.job.refresh)
        run.progress.advance("retrieve", len(traces) - len(todo))
        with progress.counting(run.progress):
            road.rank_shard(ws, [traces[p] for p in todo])
        if shared is not None and ranks:
            shared.computed.update(traces[p].record.id for p in todo)
            shared.ranked([t.record.id for t in traces])
        return traces

    def answer(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        """Rank, prime, then fill in the stored turns and send the others to the model: ``model.repeat``
        samples of each."""
        traces = road.prime_shard(run.workspace, self.rank(run, traces))
        repeat = run.job.config.model.repeat
        unasked = sum(1 for t in traces if t.gate_refused or t.prompt is None)  # one row, counted as its samples
        traces = road.sample_traces(traces, repeat)
        todo = road.lookup_turns(run.workspace, traces, refresh="model" in run.job.refresh)
        run.progress.advance("model", len(traces) - len(todo) + unasked * (repeat - 1))
        road.check_running(run)
        self.send_turns(run, [traces[p] for p in todo])
        return traces

    def send_turns(self, run: RunContext, traces: list[Trace], *, counted: bool = True) -> None:
        """Send primed traces to the run's model and wait for their turns, each stored as it arrives: the one
        place a turn leaves the run, through the run's model lane (``counted=False``: not the run's turns)."""
        if traces:
            self._lane_of(run).answer(traces, [road.turn_key(run.workspace, t) for t in traces], counted=counted)

    def _rewrite_follow_ups(self, run: RunContext, traces: list[Trace]) -> None:
        """With ``retrieval.follow_ups: model``, each follow-up's search query is the model's rewrite of it into a
        question that stands alone (``road.rewrite_traces``), asked and stored like any turn; the rule's query
        stays where the model gave none. Not in a gate-only run, nor with a model that answers in this process."""
        config = run.workspace.config
        if config.retrieval.follow_ups != "model" or run.job.gate_only:
            return
        from docpilot.models.registry import provider_of

        asked = [t for t in traces if t.earlier]
        if not asked or provider_of(config.model).endpoint == "none":
            return
        rewrites = road.rewrite_traces(run.workspace, asked)
        todo = road.lookup_turns(run.workspace, rewrites, refresh="model" in run.job.refresh)
        self.send_turns(run, [rewrites[p] for p in todo], counted=False)
        for trace, rewrite in zip(asked, rewrites, strict=True):
            trace.query = road.rewritten(rewrite) or trace.query

    def endpoint(self, run: RunContext) -> ModelConfig:
        """The model settings turns are sent with; the first call starts the local provider's server, so a
        run that sends no turn starts nothing."""
        with self._lock:  # the first shard to send a turn starts it; the others wait
            if self._settings is None:
                config = run.workspace.config
                if not self._endpoint_ready:
                    from docpilot.models.probe import served_endpoint

                    config = self._stack.enter_context(served_endpoint(config))
                self._settings = config.model
            return self._settings

    def _lane_of(self, run: RunContext) -> ModelLane:
        settings = self.endpoint(run)
        with self._lock:
            if run.interrupt.is_set():
                raise Interrupted("the run was interrupted before this stage's turns were sent")
            if self._lane is None:
                from docpilot.models.probe import fault_of

                url = settings.base_url

                def check(turn):
                    return fault_of(turn, url)

                self._lane = ModelLane(run.workspace, road.TurnWriter(run.workspace), run.limiter,
                                       progress=run.progress, settings=settings, check=check)
            return self._lane

    def cancel(self) -> None:
        if self._lane is not None:
            self._lane.cancel()

    def close(self) -> None:
        try:
            if self._lane is not None:
                self._lane.close()
        finally:
            self._stack.close()


def assistant_for(job: EvalJob, shared_ranking: SharedRanking | None = None) -> Assistant:
    """Who answers the job's questions, chosen once: the one place a run's runtime is read.

    A target named by the config (``target:``, ``--target``) is asked over HTTP; the
    server runtime asks ``docpilot serve`` (at ``job.url``, or one started for the
    run); otherwise DocPilot's own assistant answers here. ``--gate-only`` on the
    local runtime calls no model, so its endpoint is never started.
    """
    if job.runtime != "server":
        return OwnAssistant(shared_ranking, endpoint_ready=job.gate_only)
    from docpilot.run.remote import ServedAssistant, TargetAssistant  # the HTTP client stack, for these alone

    return TargetAssistant(job.config.target) if job.config.target is not None else ServedAssistant(job.url)
