"""The eval's server runtime: every record of a shard asked of a running DocPilot server.

``remote_shard`` asks the server each record's question with the API client
(``docpilot.api.client.ask``) and fills each trace so that the eval's own
``render_shard`` and ``build_rows`` make the row: the row's latency and first token
are then the times the client saw, network included. The server's own stage timings
(embed, retrieve, model) come back beside the traces, by record id.

``local_server`` (from ``docpilot.server.process``) starts ``docpilot serve`` on a free
loopback port for an eval that was given no server URL, and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable

import httpx

from docpilot.api.client import RemoteTurn, ask, ask_url
from docpilot.api.schema import TOKEN_VARIABLE
from docpilot.assistant.workspace import Trace, Workspace
from docpilot.errors import ConfigError
from docpilot.models.base import Prompt, Source, Turn
from docpilot.run.context import FirstReply
from docpilot.schema import GoldenRecord
from docpilot.server.process import local_server
from docpilot.targets.ask import Endpoint, TargetReplyError, ask_target
from docpilot.targets.sources import SourceResolver

__all__ = ["fill_trace", "local_server", "remote_shard"]

DEFAULT_CONCURRENCY = 8
"""Questions a shard keeps in flight at once (below the server's default limit of 32)."""


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


def remote_shard(
    ws: Workspace,
    traces: list[Trace],
    url: str,
    *,
    token: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    traceparent: Callable[[str], str] | None = None,
    slots: threading.Semaphore | None = None,
    first: FirstReply | None = None,
    search: bool = False,
) -> tuple[list[Trace], dict[str, dict[str, float]]]:
    """Ask a server every record of a shard; the filled traces and each record's server stage timings.

    It stands in for the retrieve, prime and model stages; run ``render_shard`` and
    ``build_rows`` after it, then set each row's ``stages_ms`` to its entry here.
    ``token`` defaults to ``DOCPILOT_SERVER_TOKEN``. A server that cannot be reached, or
    that serves other docs than ``ws`` (the panels are rendered against ``ws``), raises
    ConfigError before any question is sent; a question that fails is an errored trace.
    ``traceparent`` gives, by record id, the W3C header that puts the server's turn in
    the run's trace (``telemetry.tracing.RunTrace.traceparent``), when the run is traced.
    ``slots`` bounds the questions in flight across every shard asking at once (a run's
    shards travel on several threads, each with its own event loop). A target's first reply
    (``first``, which the run's shards share; by default this shard's own) is read
    strictly: a wrong path or credential raises ``TargetReplyError`` there, and no shard
    sends another question. The questions still go out at once, not after it. ``search`` asks
    a target's search endpoint instead (``--gate-only``): a ranking, and no answer.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}", hint="use 8")
    token = token if token is not None else (os.environ.get(TOKEN_VARIABLE, "").strip() or None)
    timeout = httpx.Timeout(ws.config.model.timeout_s + 30.0)
    target = ws.config.targets[ws.config.target] if ws.config.target is not None else None
    first = first if first is not None else FirstReply()
    turns = asyncio.run(_ask_all(ws, traces, url, token, concurrency, timeout, traceparent, slots, first, search))
    stages: dict[str, dict[str, float]] = {}
    for trace, (began, remote) in zip(traces, turns, strict=True):
        fill_trace(trace, remote, began)
        trace.unranked = target is not None and remote.retrieval is None  # a target that shows no sources
        if remote.timing is not None or remote.server_timing:
            stages[trace.record.id] = remote.stages_ms()
    return traces, stages


async def _ask_all(
    ws: Workspace, traces: list[Trace], url: str, token: str | None, concurrency: int, timeout: httpx.Timeout,
    traceparent: Callable[[str], str] | None, slots: threading.Semaphore | None, first: FirstReply,
    search: bool = False,
) -> list[tuple[float, RemoteTurn]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        if ws.config.target is None:
            await _check_server(client, url, ws)
            asking = _server_asker(client, ws, url, token, traceparent)
        else:
            asking = _target_asker(client, ws, search)

        def first_reply() -> bool:
            return not first.came.is_set()

        async def one(trace: Trace) -> tuple[float, RemoteTurn]:
            async with gate:
                if slots is not None and not slots.acquire(blocking=False):
                    await asyncio.to_thread(slots.acquire)  # the other shards hold the run's slots
                try:
                    if first.failed is not None:
                        raise first.failed
                    began = time.time()
                    turn = await asking(trace.record, first_reply)
                    first.came.set()  # replies after this one are read as answers or error rows
                    return began, turn
                except TargetReplyError as exc:
                    first.failed = exc
                    raise
                finally:
                    if slots is not None:
                        slots.release()

        return await asyncio.gather(*(one(t) for t in traces))


def _server_asker(client: httpx.AsyncClient, ws: Workspace, url: str, token: str | None,
                  traceparent: Callable[[str], str] | None) -> Callable[..., Awaitable[RemoteTurn]]:
    """How a record is asked of DocPilot's own server."""

    async def asking(record: GoldenRecord, strict: Callable[[], bool]) -> RemoteTurn:
        return await ask(client, url, record.question, record.scope, token, language=record.language,
                         max_tokens=ws.config.model.max_tokens,
                         traceparent=traceparent(record.id) if traceparent is not None else None)

    return asking


def _target_asker(client: httpx.AsyncClient, ws: Workspace, search: bool) -> Callable[..., Awaitable[RemoteTurn]]:
    """How a record is asked of the run's target (``config.target``), or of its search endpoint, variables read once."""
    name = ws.config.target
    endpoint = Endpoint.open(ws.config.targets[name], name, SourceResolver(ws.corpus))
    endpoint = endpoint.searching() if search else endpoint

    async def asking(record: GoldenRecord, strict: Callable[[], bool]) -> RemoteTurn:
        return await ask_target(client, endpoint, record.question, record.scope, record.id, strict=strict)

    return asking


async def _check_server(client: httpx.AsyncClient, url: str, ws: Workspace) -> None:
    """Fail before the first question when the server is down or answers from other docs."""
    health = ask_url(url).removesuffix("/v1/ask") + "/healthz"
    start = "start it with `docpilot serve`, or pass the URL it printed"
    try:
        response = await client.get(health)
    except httpx.HTTPError as exc:
        raise ConfigError(f"cannot reach the server at {url} ({type(exc).__name__}: {exc})", hint=start) from None
    try:
        served = response.json().get("corpus") if response.status_code == 200 else None
    except ValueError:
        served = None
    if not isinstance(served, str):
        raise ConfigError(f"{health} answered HTTP {response.status_code}, not a DocPilot health report", hint=start)
    if served != ws.corpus.fingerprint:
        raise ConfigError(
            f"the server at {url} answers from other docs than this eval's {ws.corpus.root} "
            f"(corpus {served[:12]}, here {ws.corpus.fingerprint[:12]})",
            hint="serve the same docs folder the eval reads (corpus.docs or --docs), then run again",
        )
