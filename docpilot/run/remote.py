"""The assistants asked over HTTP: DocPilot's server (``ServedAssistant``) and a target (``TargetAssistant``).

``run.assistants.assistant_for`` chooses one of them for a run that is not DocPilot's own
assistant in this process, so only such a run loads the HTTP client stack. Each asks a
shard's questions with ``ask_all``, on the run's loop and within its limiter, its first
reply read strictly (``FirstReply``), and ``fill_trace`` puts each reply into its trace
so that the eval's own render and score steps make the row: the row's latency and
first token are then the times the client saw, network included.

``local_server`` (from ``docpilot.server.process``) starts ``docpilot serve`` on a free
loopback port for an eval that was given no server URL, and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from docpilot.api.client import RemoteTurn, ask, ask_url
from docpilot.assistant.primer import history_messages
from docpilot.assistant.workspace import Trace, Workspace
from docpilot.errors import ConfigError
from docpilot.models.base import Prompt, Source, Turn
from docpilot.net.body import read_at_most
from docpilot.net.connection import routed_session
from docpilot.run import road
from docpilot.run.context import Assistant, RunContext
from docpilot.run.limiter import Interrupted, Limiter
from docpilot.server.process import local_server
from docpilot.targets.ask import Endpoint, TargetReplyError, ask_target

__all__ = ["FirstReply", "ServedAssistant", "TargetAssistant", "ask_all", "check_server", "fill_trace",
           "local_server", "server_asker", "target_asker"]

_HEALTH_BYTES = 1 << 16
"""The most of a health report read: DocPilot's is a few hundred bytes."""


def fill_trace(trace: Trace, remote: RemoteTurn, began: float | None = None) -> Trace:
    """Put a server's answer into an eval trace, so ``render_shard`` and ``build_rows`` make its row.

    ``retrieve_ms`` is the client's wait for the `retrieval` event, and the turn's times
    run from there, because ``build_rows`` adds the two: the row then holds the times
    the client saw. A gate refusal ends at the refusal, so its wait is the whole turn.
    ``began`` (``time.time()`` as the question was sent) places the retrieve and model
    stages in the record's timeline, for its trace.
    """
    if began is not None:
        asked = began + (remote.retrieval_ms or 0.0) / 1000
        trace.timeline["retrieve"] = (began, asked)
        if remote.latency_ms is not None and remote.retrieval_ms is not None and remote.latency_ms > remote.retrieval_ms:
            trace.timeline["model"] = (asked, began + remote.latency_ms / 1000)
    trace.outside_docs = list(remote.outside_docs)
    trace.stages_dropped = remote.stages_dropped
    trace.thread = remote.thread
    trace.query = remote.retrieval_query  # what the server searched with, when it read a follow-up's turns
    if remote.retrieval is not None:
        trace.hits = [hit.model_dump() for hit in remote.retrieval.hits]
        outside = set(remote.outside_docs)
        trace.links = {s.section_id: s.url for s in remote.retrieval.primed  # a web link only: never `javascript:`
                       if s.section_id in outside and s.url.startswith(("https://", "http://"))}
        sources = [Source(n=s.n, section_id=s.section_id, title=s.title, text="") for s in remote.retrieval.primed]
        trace.prompt = Prompt(question=trace.record.question, sources=sources)
        trace.retrieve_ms = remote.retrieval_ms
    if remote.refusal is not None and remote.refusal.refused_by == "gate" and remote.error is None:
        trace.gate_refused = True
        trace.retrieve_ms = remote.latency_ms
        return trace
    offset = trace.retrieve_ms or 0.0

    def after(ms: float | None) -> float | None:
        return None if ms is None else max(ms - offset, 0.0)

    refused = remote.refusal is not None and remote.error is None
    trace.turn = Turn(
        answer=remote.answer,
        reasoning=remote.reasoning,
        refused=refused,
        refusal_cause=remote.refusal.cause if refused and remote.refusal else None,
        latency_ms=after(remote.latency_ms),
        first_token_ms=after(remote.first_token_ms),
        first_thought_ms=after(remote.first_thought_ms),
        usage=remote.usage,
        truncated=None if remote.truncated is None else remote.truncated and remote.error is None,
        error=remote.error,
        error_code=remote.error_code,
        cited=remote.cited,
    )
    return trace


@dataclass
class FirstReply:
    """Whether a run's first reply came yet: read strictly, so a wrong path or credential stops the run there
    (``targets.ask.ask_target``); every question still goes out at once. Lives on the run's loop."""

    came: bool = False
    """Set once a reply has come: later ones are read as answers or error rows."""
    failed: Exception | None = None
    """The fault the first reply showed (a ``TargetReplyError``): no other question is sent."""


Asking = Callable[[Trace, Callable[[], bool]], Awaitable[RemoteTurn]]
"""How one trace's question is asked over HTTP, given whether to read its reply strictly."""


async def ask_all(limiter: Limiter, traces: list[Trace], asking: Asking,
                  first: FirstReply) -> list[tuple[float, RemoteTurn]]:
    """Ask every trace's question, each holding a slot of the run's limiter; ``(time sent, reply)`` of each."""

    async def one(trace: Trace) -> tuple[float, RemoteTurn]:
        async with limiter.slot:
            if first.failed is not None:
                raise first.failed
            began = time.time()
            try:
                turn = await asking(trace, lambda: not first.came)
            except TargetReplyError as exc:
                first.failed = first.failed or exc
                raise
            first.came = True  # replies after this one are read as answers or error rows
            return began, turn

    return await asyncio.gather(*(one(t) for t in traces))


def server_asker(client: aiohttp.ClientSession, ws: Workspace, url: str, token: str | None,
                 traceparent: Callable[[str], str] | None) -> Asking:
    """How a record is asked of DocPilot's own server."""

    async def asking(trace: Trace, strict: Callable[[], bool]) -> RemoteTurn:
        record = trace.record
        return await ask(client, url, record.question, record.scope, token, language=record.language,
                         max_tokens=ws.config.model.max_tokens, history=history_messages(trace.earlier) or None,
                         traceparent=traceparent(record.id) if traceparent is not None else None)

    return asking


def target_asker(client: aiohttp.ClientSession, endpoint: Endpoint) -> Asking:
    """How a record is asked of a target's endpoint (its variables read once, by ``Endpoint.open``)."""

    async def asking(trace: Trace, strict: Callable[[], bool]) -> RemoteTurn:
        record = trace.record
        return await ask_target(client, endpoint, record.question, record.scope, record.id, strict=strict,
                                history=history_messages(trace.earlier), thread=trace.thread)

    return asking


async def check_server(client: aiohttp.ClientSession, url: str, ws: Workspace) -> None:
    """Fail before the first question when the server is down or answers from other docs."""
    health = ask_url(url).removesuffix("/v1/ask") + "/healthz"
    start = "start it with `docpilot serve`, or pass the URL it printed"
    try:
        async with client.get(health) as response:
            status, body = response.status, await read_at_most(response, _HEALTH_BYTES)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ConfigError(f"cannot reach the server at {url} ({type(exc).__name__}: {exc})", hint=start) from None
    try:
        report = json.loads(body[0]) if status == 200 else None
        served = report.get("corpus") if isinstance(report, dict) else None
    except ValueError:
        served = None
    if not isinstance(served, str):
        raise ConfigError(f"{health} answered HTTP {status}, not a DocPilot health report", hint=start)
    if served != ws.corpus.fingerprint:
        raise ConfigError(
            f"the server at {url} answers from other docs than this eval's {ws.corpus.root} "
            f"(corpus {served[:12]}, here {ws.corpus.fingerprint[:12]})",
            hint="serve the same docs folder the eval reads (corpus.docs or --docs), then run again",
        )


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
