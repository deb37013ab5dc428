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
- ``ServedAssistant``: each question asked of a running ``docpilot serve`` (started for
  the run when no URL is given), which retrieves, primes and answers on its side;
  nothing is cached, what is measured is the server, network included;
- ``TargetAssistant``: each question asked of another assistant's HTTP API, configured
  under ``targets:``, its first reply read strictly.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

import aiohttp

from docpilot import progress
from docpilot.net.connection import routed_session
from docpilot.run import road
from docpilot.run.context import Assistant, RunContext
from docpilot.run.lane import Interrupted, ModelLane
from docpilot.run.remote import FirstReply, ask_all, check_server, fill_trace, server_asker, target_asker

if TYPE_CHECKING:
    from docpilot.assistant.workspace import Trace
    from docpilot.config.model import ModelConfig
    from docpilot.run.job import EvalJob
    from docpilot.run.limiter import Limiter
    from docpilot.run.remote import Asking
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


class _OverHttp(Assistant):
    """An assistant asked over HTTP: each question within the run's limiter, the first reply read strictly."""

    def __init__(self) -> None:
        self._client: aiohttp.ClientSession | None = None
        self._first = FirstReply()
        self._limiter: Limiter | None = None

    def open(self, run: RunContext) -> None:
        self._limiter = run.limiter

    def _asking(self, run: RunContext, client: aiohttp.ClientSession, search: bool) -> Asking:
        raise NotImplementedError

    def _url(self) -> str:
        """The address the questions go to (the session is routed for it)."""
        raise NotImplementedError

    def _timeout(self, run: RunContext) -> aiohttp.ClientTimeout:
        """How long a request may wait to connect and between two pieces of its reply."""
        raise NotImplementedError

    async def _ready(self, run: RunContext, client: aiohttp.ClientSession) -> None:
        """Check, once, what must hold before the first question."""

    def _client_of(self, run: RunContext) -> aiohttp.ClientSession:
        if self._client is None:
            async def made() -> aiohttp.ClientSession:  # on the run's loop, which its connections belong to
                client = routed_session(self._url(), connections=run.limiter.turns, timeout=self._timeout(run))
                try:
                    await self._ready(run, client)
                except BaseException:
                    await client.close()
                    raise
                return client

            self._client = run.limiter.run(made())
        return self._client

    def _ask(self, run: RunContext, traces: list[Trace], *, search: bool = False) -> None:
        client = self._client_of(run)
        replies = run.limiter.run(ask_all(run.limiter, traces, self._asking(run, client, search), self._first))
        for trace, (began, remote) in zip(traces, replies, strict=True):
            fill_trace(trace, remote, began)
            trace.unranked = self.shows_no_ranking(remote)
            # The assistant's own stage timings (embed, retrieve, model), when it sent them.
            trace.stages_ms = remote.stages_ms() if remote.timing is not None or remote.server_timing else {}

    def shows_no_ranking(self, remote) -> bool:
        """Whether a reply showed no ranking that retrieval metrics may read."""
        return False

    def rank(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        self._ask(run, traces, search=True)
        run.progress.advance("retrieve", len(traces))
        return traces

    def answer(self, run: RunContext, traces: list[Trace]) -> list[Trace]:
        """Each record asked; with ``model.repeat`` above 1, the shard asked that many times over, a sample per
        round (the assistant retrieves each time: its retrieval is part of what is measured)."""
        repeat = run.job.config.model.repeat
        rounds = [traces] if repeat == 1 else [road.sampled(traces, s) for s in range(repeat)]
        for asked in rounds:
            self._ask(run, asked)
            run.progress.advance("model", len(asked))
        run.progress.advance("retrieve", len(traces))
        return [trace for samples in zip(*rounds, strict=True) for trace in samples]

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Interrupted):
                self._limiter.run(self._client.close())


class ServedAssistant(_OverHttp):
    """DocPilot's own assistant behind ``docpilot serve``: the one at ``url``, or one started for the run."""

    def __init__(self, url: str | None, token: str | None = None) -> None:
        super().__init__()
        self.url = url
        self._token = token
        self._stack = contextlib.ExitStack()

    def open(self, run: RunContext) -> None:
        super().open(run)
        if self._token is None:
            from docpilot.api.schema import TOKEN_VARIABLE

            self._token = os.environ.get(TOKEN_VARIABLE, "").strip() or None
        if self.url is None:
            from docpilot.run.reaper import watch_children
            from docpilot.run.remote import local_server

            watch_children()  # the local server (and its workers) go if this process is killed
            self.url = self._stack.enter_context(local_server(run.job.config))

    def _url(self) -> str:
        return self.url

    def _timeout(self, run: RunContext) -> aiohttp.ClientTimeout:
        # The server's own model is bounded by model.timeout_s; the margin covers its retrieval and queue.
        bound = run.job.config.model.timeout_s + 30.0
        return aiohttp.ClientTimeout(total=None, sock_connect=bound, sock_read=bound)

    async def _ready(self, run: RunContext, client: aiohttp.ClientSession) -> None:
        await check_server(client, self.url, run.workspace)  # down, or serving other docs: before any question

    def _asking(self, run: RunContext, client: aiohttp.ClientSession, search: bool) -> Asking:
        # The server's turns join the run's trace, when it is traced.
        traceparent = run.trace.traceparent if run.trace is not None else None
        return server_asker(client, run.workspace, self.url, self._token, traceparent)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._stack.close()


class TargetAssistant(_OverHttp):
    """Another assistant's HTTP API, as the config's ``targets.NAME`` describes it."""

    stage_labels: dict[str, str] = {}  # noqa: RUF012

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.stage_labels = {"retrieve": f"ask {name}", "model": "score"}
        self._endpoint = None

    def open(self, run: RunContext) -> None:
        from docpilot.targets.ask import Endpoint
        from docpilot.targets.sources import SourceResolver

        super().open(run)
        config = run.job.config
        self._endpoint = Endpoint.open(config.targets[self.name], self.name, SourceResolver(run.workspace.corpus))

    def _url(self) -> str:
        return self._endpoint.url

    def _timeout(self, run: RunContext) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None)  # each attempt is bounded by the target's timeout_s

    def _asking(self, run: RunContext, client: aiohttp.ClientSession, search: bool) -> Asking:
        return target_asker(client, self._endpoint.searching() if search else self._endpoint)

    def shows_no_ranking(self, remote) -> bool:
        return remote.retrieval is None  # a target whose reply maps no sources


def assistant_for(job: EvalJob, shared_ranking: SharedRanking | None = None) -> Assistant:
    """Who answers the job's questions, chosen once: the one place a run's runtime is read.

    A target named by the config (``target:``, ``--target``) is asked over HTTP; the
    server runtime asks ``docpilot serve`` (at ``job.url``, or one started for the
    run); otherwise DocPilot's own assistant answers here. ``--gate-only`` on the
    local runtime calls no model, so its endpoint is never started.
    """
    if job.runtime == "server" and job.config.target is not None:
        return TargetAssistant(job.config.target)
    if job.runtime == "server":
        return ServedAssistant(job.url)
    return OwnAssistant(shared_ranking, endpoint_ready=job.gate_only)
