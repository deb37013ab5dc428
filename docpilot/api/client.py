"""DocPilot's API client: one question to a running server, its event stream read and timed as users meet it.

``ask`` sends one question to ``POST /v1/ask`` and reads the event stream, timing it
with a monotonic clock started just before the request is sent:

    latency_ms        send → the `done` event
    first_token_ms    send → the first `token` event with more than white space (the rule of
                      ``models.base.paints``; a turn that painted no answer text counts
                      at its latency)
    first_thought_ms  send → the first `thought` event (None when there was none)
    retrieval_ms      send → the `retrieval` event

The eval's server runtime (``docpilot.run.remote``) asks with it; so can any Python
caller of a running server. A follow-up is asked with ``history``, the conversation's
earlier messages (``docpilot.assistant.primer.history_messages`` builds them from
question and answer pairs); the server says what it searched the docs with, and
``RemoteTurn.retrieval_query`` carries it back.

Server faults never raise out of ``ask``: they end the turn with ``RemoteTurn.error`` and
its ``error_code``. A server's stream is capped as it arrives, by the openai model's rule
(``docpilot.models.wire.reply_char_limit`` of the eval's ``model.max_tokens``): past it the
turn fails with ``reply_too_long`` and its connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from docpilot.api.schema import (
    EVENT_MODELS,
    TOKEN_VARIABLE,
    ErrorEvent,
    RefusalEvent,
    RetrievalEvent,
    TimingEvent,
)
from docpilot.assistant.render import Panel
from docpilot.config.model import ModelConfig
from docpilot.models.base import paints
from docpilot.models.wire import line_limit, reply_char_limit, reply_too_long
from docpilot.net.body import read_at_most
from docpilot.net.retry import RetryPolicy, parse_retry_after
from docpilot.net.sse import EventReader, LineTooLong
from docpilot.schema import ErrorCode

__all__ = ["RemoteEvent", "RemoteTurn", "ask", "ask_url"]

BUSY_RETRIES = 3
"""Times ``ask`` retries a 503 before it reports the server as full."""
_EXCERPT = 200
_ERROR_BYTES = 1 << 16
"""The most of an error reply read: its message is cut to ``_EXCERPT`` characters anyway."""
_DROPPED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
_DROPPED_POLICY = RetryPolicy(2, backoff_base_s=0.0, backoff_cap_s=0.0)
"""A connection dropped before any reply is asked again at once, twice."""
_HINTS = {
    401: f"set {TOKEN_VARIABLE} to the server's token",
    404: "pass the server's base URL, such as http://127.0.0.1:8000",
    413: "the question is too large for the server",
    422: "the server could not read the question; see the message",
    503: "the server is full; lower the eval's concurrency or raise the server's --max-concurrency",
}
# The codes of the server's `error` events, as the row's error codes; any other is the server's own failure.
_EVENT_CODES: dict[str, ErrorCode] = {
    "model_timeout": "timeout",
    "model_unfinished": "unfinished",
    "model_empty": "empty",
    "reply_too_long": "reply_too_long",
}
_DEFAULT_MAX_TOKENS: int = ModelConfig.model_fields["max_tokens"].default
_OTHER_EVENTS = 64  # events with no text (retrieval, citations, timing, done): a handful a turn


class RemoteEvent(BaseModel):
    """One event as it arrived."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The event's name (`retrieval`, `token`, ...)."""
    data: dict[str, Any]
    """Its JSON payload."""
    at_ms: float
    """When it arrived, in milliseconds after the request was sent."""


class RemoteTurn(BaseModel):
    """One question answered by a server, as the client saw it."""

    model_config = ConfigDict(extra="forbid")

    status: int | None = None
    """The HTTP status; None when no response came."""
    events: list[RemoteEvent] = Field(default_factory=list)
    """Every event, in arrival order."""
    latency_ms: float | None = None
    """Send → `done` (or → the failure)."""
    first_token_ms: float | None = None
    """Send → first answer text; the latency when none was painted."""
    first_thought_ms: float | None = None
    """Send → first reasoning text; None when the model streamed none."""
    retrieval_ms: float | None = None
    """Send → the `retrieval` event."""
    retrieval: RetrievalEvent | None = None
    """Ranked sections and primed sources."""
    retrieval_query: str | None = None
    """What the assistant searched the docs with, when it was not the question as asked (a follow-up, read
    with the turns before it: the `retrieval` event's `query`); None when it searched with the question, or
    cannot say (a target)."""
    thread: str | None = None
    """The conversation thread the reply named (a target's `reply.thread`, docs/targets.md#thread), to send
    back with the next turn; else the thread the turn was asked in; None outside a thread."""
    answer: str = ""
    """The answer text, the `token` events joined (the model's `REFUSE:` reply when it refused)."""
    reasoning: str | None = None
    """The `thought` events joined."""
    citations: Panel | None = None
    """The rendered panel the server sent."""
    cited: list[str] | None = None
    """What a target's answer cites, read by its `reply.citations` (docs/targets.md): each a number into
    the returned sources (`"2"`) or a section id, as a marker's label; None when its markers say."""
    refusal: RefusalEvent | None = None
    """The refusal, when refused."""
    timing: TimingEvent | None = None
    """The server's stage timings."""
    server_timing: dict[str, float] = Field(default_factory=dict)
    """Stage name → milliseconds from the reply's `Server-Timing` header (a target's, docs/targets.md)."""
    stages_dropped: int = 0
    """`Server-Timing` entries dropped as no measurement: an unusable name, or a duration that is not a
    finite number from 0 to a day."""
    outside_docs: list[str] = Field(default_factory=list)
    """A target's returned sources that name nothing the docs hold, as mapped (``targets.sources``)."""
    truncated: bool | None = False
    """The server said the answer stopped at the model's `max_tokens`; None when the assistant cannot say
    (a target, which gives no finish reason)."""
    usage: dict[str, int] = Field(default_factory=dict)
    """Token usage the server's model reported."""
    error: str | None = None
    """What went wrong; None when the turn completed."""
    error_code: ErrorCode | None = None
    """The kind of fault in `error` (``docpilot.schema.ErrorCode``); None when the turn completed."""

    def fail(self, code: ErrorCode, message: str) -> None:
        """End the turn with a fault, unless an earlier one already ended it."""
        if self.error is None:
            self.error, self.error_code = message, code

    def stages_ms(self) -> dict[str, float]:
        """The server's stage timings as a row's ``stages_ms``: embed, retrieve, model (a target's: its `Server-Timing`)."""
        if self.timing is None:
            return dict(self.server_timing)
        return {"embed": self.timing.embed_ms, "retrieve": self.timing.retrieve_ms, "model": self.timing.model_ms}


def ask_url(url: str) -> str:
    """The ask endpoint of a server given by its base URL (a full ``.../v1/ask`` URL is kept)."""
    url = url.rstrip("/")
    return url if url.endswith("/v1/ask") else f"{url}/v1/ask"


async def ask(
    session: aiohttp.ClientSession,
    url: str,
    question: str,
    scope: Sequence[str] | None = None,
    token: str | None = None,
    *,
    language: str | None = None,
    history: Sequence[Mapping[str, str]] | None = None,
    busy_retries: int = BUSY_RETRIES,
    max_tokens: int = _DEFAULT_MAX_TOKENS,
    traceparent: str | None = None,
) -> RemoteTurn:
    """Ask a server one question over its event stream, timing what arrives.

    ``session`` is the caller's aiohttp session (``net.connection.routed_session`` routes
    one for the server's URL); its connections are kept alive from one question to the next.
    ``history``: for a follow-up, the conversation's earlier messages, first first, each
    ``{"role": "user" | "assistant", "content": ...}``; empty or None for a single question.

    A 503 is retried after its ``Retry-After`` (at most ``busy_retries`` times), and a
    connection dropped before any reply is retried twice; the waits count in the
    latency, as a user would wait them. Any other fault ends the turn with ``error``.
    A reply longer than ``max_tokens`` allows (``reply_char_limit``) is cut there.
    ``traceparent`` (a W3C Trace Context header) asks a traced server to put its turn
    under the caller's span.
    """
    endpoint = ask_url(url)
    body = orjson.dumps(_ask_body(question, scope, language, history))
    headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if traceparent:
        headers["traceparent"] = traceparent
    turn = RemoteTurn()
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    # A full server says when to come back (Retry-After); one that does not is asked again after a second.
    busy_policy = RetryPolicy(busy_retries, backoff_base_s=1.0, backoff_cap_s=1.0, jitter=False)
    busy = dropped = 0
    while True:
        try:
            async with session.post(endpoint, data=body, headers=headers) as response:
                turn.status = response.status
                if response.status == 503 and not busy_policy.gives_up(busy):
                    await read_at_most(response, _ERROR_BYTES)
                    await asyncio.sleep(busy_policy.wait_s(busy, parse_retry_after(response.headers.get("retry-after"))))
                    busy += 1
                    continue
                if response.status != 200:
                    code: ErrorCode = "auth" if response.status in (401, 403) else "http_status"
                    turn.fail(code, await _http_error(response, endpoint))
                    break
                await _read_events(turn, response.content.iter_any(), elapsed, max_tokens)
                break  # leaving the stream unread closes its connection
        except aiohttp.ClientPayloadError:
            break  # the stream was cut: the turn is incomplete, unless its `done` event came
        except TimeoutError as exc:  # aiohttp's read and connect timeouts among them
            turn.fail("timeout", _unreachable(endpoint, exc))
            break
        except _DROPPED as exc:
            # A kept-alive connection the server closed just as it was reused fails before
            # any reply; asking again is safe, since a question changes nothing on the server.
            if not turn.events and not _DROPPED_POLICY.gives_up(dropped):
                dropped += 1
                continue
            turn.fail("connect", _unreachable(endpoint, exc))
            break
        except aiohttp.ClientError as exc:
            turn.fail("connect", _unreachable(endpoint, exc))
            break
    return _close(turn, elapsed())


def _ask_body(question: str, scope: Sequence[str] | None, language: str | None,
              history: Sequence[Mapping[str, str]] | None) -> dict[str, Any]:
    """The JSON body of ``POST /v1/ask``: what is set of the question's fields, streamed."""
    body: dict[str, Any] = {"question": question, "stream": True}
    if scope is not None:
        body["scope"] = list(scope)
    if language is not None:
        body["language"] = language
    if history:
        body["history"] = [{"role": m["role"], "content": m["content"]} for m in history]
    return body


def _unreachable(endpoint: str, exc: Exception) -> str:
    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    return f"no reply from {endpoint} ({reason}); fix: check the URL and that the server is running"


async def _http_error(response: aiohttp.ClientResponse, endpoint: str) -> str:
    raw = (await read_at_most(response, _ERROR_BYTES))[0].decode("utf-8", errors="replace")
    try:
        message = ErrorEvent.model_validate(json.loads(raw)["error"]).message
    except (ValueError, KeyError, TypeError, ValidationError):
        message = " ".join(raw.split())[:_EXCERPT]
    hint = _HINTS.get(response.status, "see the server's log")
    return f"HTTP {response.status} from {endpoint}: {message}; fix: {hint}"


async def _read_events(turn: RemoteTurn, body: AsyncIterator[bytes], elapsed: Callable[[], float],
                       max_tokens: int) -> None:
    """Take the server-sent events into the turn, up to the cap of ``max_tokens`` (``reply_char_limit``)."""
    limit = reply_char_limit(max_tokens)
    reader = EventReader(max_line=line_limit(limit))  # the reader the openai model uses
    async for piece in body:
        try:
            events = reader.feed_named(piece)
        except LineTooLong as exc:
            turn.fail(*reply_too_long(max_tokens, f"a line of the server's stream longer than {exc.limit} characters"))
            return
        for name, data in events:
            _take(turn, name, data, elapsed())
            # Each event but a handful carries some text, so the count is bounded with the characters.
            if len(turn.answer) + len(turn.reasoning or "") > limit or len(turn.events) > limit + _OTHER_EVENTS:
                turn.fail(*reply_too_long(max_tokens, f"the server sent more than {limit} characters"))
                return


def _take(turn: RemoteTurn, name: str, raw: str, now_ms: float) -> None:
    model = EVENT_MODELS.get(name)
    try:
        payload = model.model_validate_json(raw) if model is not None else None
    except ValidationError:
        turn.fail("malformed", f"the server sent a malformed {name!r} event: {raw[:_EXCERPT]!r}")
        return
    turn.events.append(RemoteEvent(name=name, data=payload.model_dump() if payload else {"raw": raw}, at_ms=now_ms))
    if name == "token" and payload.text:  # type: ignore[union-attr]
        turn.answer += payload.text  # type: ignore[union-attr]
        if turn.first_token_ms is None and paints(payload.text):  # type: ignore[union-attr]
            turn.first_token_ms = now_ms
    elif name == "thought" and payload.text:  # type: ignore[union-attr]
        turn.reasoning = (turn.reasoning or "") + payload.text  # type: ignore[union-attr]
        if turn.first_thought_ms is None:
            turn.first_thought_ms = now_ms
    elif name == "retrieval":
        turn.retrieval, turn.retrieval_ms = payload, now_ms  # type: ignore[assignment]
        turn.retrieval_query = payload.query  # type: ignore[union-attr]
    elif name in ("citations", "refusal", "timing"):
        setattr(turn, name, payload)
    elif name == "error":
        code = _EVENT_CODES.get(payload.code, "service_error")  # type: ignore[union-attr]
        turn.error = f"{payload.code}: {payload.message} (request {payload.request_id})"  # type: ignore[union-attr]
        turn.error_code = code
    elif name == "done":
        turn.latency_ms = now_ms
        turn.truncated, turn.usage = payload.truncated, payload.usage  # type: ignore[union-attr]


def _close(turn: RemoteTurn, now_ms: float) -> RemoteTurn:
    if turn.latency_ms is None:
        turn.latency_ms = now_ms
        turn.fail("incomplete", "the stream ended before its `done` event; fix: check the server's log")
    if turn.error is None and turn.refusal is None and not paints(turn.answer) and turn.status == 200:
        # A turn is an answer only with answer text: an empty one would be scored as a wrong answer.
        turn.fail("empty", (
            "the server's turn ended with no answer text and no refusal; "
            "fix: check the server's log and the model it calls"
        ))
    turn.answer = turn.answer.strip()
    if turn.refusal is not None and turn.refusal.reply is not None:
        turn.answer = turn.refusal.reply
    if turn.first_token_ms is None:
        turn.first_token_ms = turn.latency_ms  # nothing painted early: the wait was the whole turn
    return turn
