"""Asking a target: an assistant DocPilot did not build, its request and reply mapped in config.

``Endpoint.open`` reads what a target takes from the environment once (``${NAME}`` in its
URL and headers), keeping those values as the secrets every message is cleared of.
``ask_target`` sends one record's question as the target's body template says and reads
the reply as its ``reply`` mapping says (a JSON document, an SSE stream or NDJSON
lines, each field a JMESPath expression), into the same ``RemoteTurn`` DocPilot's own
client returns, timed the same way with a monotonic clock started just before the
request is sent:

    latency_ms        send → the whole reply (or its end event)
    first_token_ms    send → the first delta with more than white space; a JSON reply's latency
    server_timing     the reply's ``Server-Timing`` header (``retrieve;dur=12.3, model;dur=80``)

The returned sources, in their order, become the ranking and the numbered sources the
answer's ``[n]`` markers cite; each is read by ``targets.sources.source_name`` and placed
in the docs by the endpoint's ``SourceResolver`` (a section, a page, or outside the docs,
listed in ``RemoteTurn.outside_docs``). A target whose mapping names no sources gives no
ranking: ``RemoteTurn.retrieval`` is None.
A mapping with ``citations`` reads what the answer cites from the reply instead of its
markers, into ``RemoteTurn.cited``: a number as its digits, a source as its section id.

A follow-up is asked with its conversation: ``history`` (the earlier turns as chat
messages) fills ``{history}`` and ``{messages}`` in the body, and ``thread`` (the thread
id the conversation's last reply named) fills ``{thread}`` in the URL, the headers and
the body, and picks ``thread_url`` and ``thread_body`` where the target has them. A
reply's own thread id (``reply.thread``) comes back in ``RemoteTurn.thread``; a reply
that names none keeps the thread it was asked in.

A 429 or 503 is asked again, as ``docpilot.net.retry`` says (the target's ``retries``
times, after its ``Retry-After`` up to a cap, else a doubling backoff); the waits count
in the latency, as a user would wait them. Past the last retry the turn is an error
naming the status.

Every turn is bounded: ``timeout_s`` from sending to the reply's end (a stream that never
ends is cut there), ``max_reply_bytes`` read at most (the rest is never held), and
``max_sources``; past a bound the turn is an error (``timeout``, ``reply_too_large``).

A reply the mapping cannot read (an answer path that matches nothing, a field of the
wrong type, a body that is not JSON) or an auth failure (401, 403) is a fault of the
config, not of one answer:
with ``strict`` (the run's first reply) it raises ``TargetReplyError``, naming the
path, the status and the keys the reply did have; otherwise it ends the turn with an
error. Nothing is stored as an answer either way.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import jmespath
import orjson

from docpilot.api.client import RemoteEvent, RemoteTurn
from docpilot.api.schema import PrimedSource, RankedHit, RefusalEvent, RetrievalEvent
from docpilot.config.target import ReplyMapping, Target
from docpilot.errors import ConfigError
from docpilot.models.base import paints, parse_refusal
from docpilot.net.retry import RetryPolicy, parse_retry_after
from docpilot.net.sse import EventReader
from docpilot.redact import MARK, redact
from docpilot.targets.sources import SourceResolver, section_id, source_name

__all__ = [
    "Endpoint", "TargetReplyError", "ask_target", "parse_server_timing", "request_body",
    "section_id",
]

_EXCERPT = 200
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"\{(question|scope|id|history|messages|thread)\}")
_LANGCHAIN_TYPES = {"user": "human", "assistant": "ai"}
"""A chat message's role as LangChain's message ``type`` names it."""
_BUSY = (429, 503)
"""Statuses that say the target is busy for now: asked again, by the target's retry policy."""
_TIMING_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_LONGEST_STAGE_MS = 86_400_000.0
"""A stage time past a day is no measurement: such a `Server-Timing` entry is dropped."""


class TargetReplyError(ConfigError):
    """The target's first reply could not be read by its mapping, or it refused the credentials."""


def _read_variables(text: str, where: str, found: list[str]) -> str:
    """``text`` with each ``${NAME}`` read from the environment (each value added to ``found``)."""
    def variable(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if value is None:
            raise ConfigError(f"{where} reads ${{{match.group(1)}}}, which is not set",
                              hint=f"export {match.group(1)}=... before the run")
        found.append(value)
        return value

    return _VARIABLE.sub(variable, text)


@dataclass(frozen=True)
class Endpoint:
    """A target ready to be asked: its URL and headers read from the environment once, and the docs it names.

    ``secrets`` are the values read from the environment: whatever a reply or a fault
    echoes of them is redacted before it reaches a row, a message or a report.
    """

    target: Target
    name: str
    url: str
    headers: dict[str, str]
    secrets: tuple[str, ...]
    docs: SourceResolver | None = None
    """Where returned sources land in the docs; None keeps the ids as mapped (every source a section)."""
    thread_url: str | None = None
    """The target's ``thread_url`` with its variables read; None sends every turn to ``url``."""

    @classmethod
    def open(cls, target: Target, name: str = "target", docs: SourceResolver | None = None) -> Endpoint:
        """Read the target's ``${NAME}`` variables; ConfigError names one that is not set."""
        found: list[str] = []
        url = _read_variables(target.url, f"targets.{name}.url", found)
        headers = {key: _read_variables(value, f"targets.{name}.headers.{key}", found)
                   for key, value in target.headers.items()}
        if not re.match(r"^https?://\S+$", url):
            raise ConfigError(f"targets.{name}.url is {redact(url, *found)!r} once its variables are read, "
                              "not an http(s) URL", hint="set the variable to a URL such as http://127.0.0.1:9000")
        thread_url = (_read_variables(target.thread_url, f"targets.{name}.thread_url", found)
                      if target.thread_url is not None else None)
        secrets = tuple(sorted({v for v in found if len(v.strip()) >= 4}, key=len, reverse=True))
        return cls(target, name, url, headers, secrets, docs, thread_url)

    def searching(self) -> Endpoint:
        """The target's search endpoint (``target.search``), read as a JSON reply with sources and no answer."""
        search = self.target.search
        if search is None:
            raise ConfigError(f"targets.{self.name} has no search endpoint",
                              hint=f"add targets.{self.name}.search (url, body, sources), or run without --gate-only")
        found = list(self.secrets)
        url = _read_variables(search.url, f"targets.{self.name}.search.url", found)
        reply = ReplyMapping(kind="json", sources=search.sources, source_id=search.source_id)
        ranked = self.target.model_copy(update={"url": search.url, "method": search.method, "body": search.body,
                                                "reply": reply, "thread_url": None, "thread_body": None})
        secrets = tuple(sorted({v for v in found if len(v.strip()) >= 4}, key=len, reverse=True))
        return Endpoint(ranked, self.name, url, self.headers, secrets, self.docs)

    def clean(self, text: str) -> str:
        """``text`` with every value read from the environment replaced by ``[redacted]``."""
        for value in self.secrets:
            text = text.replace(value, MARK)
        return text

    def excerpt(self, text: str | bytes, limit: int = _EXCERPT) -> str:
        """The start of a reply's text, at most ``limit`` characters, cleaned before it is cut.

        Cut first, a value across the cut would keep its first half, which ``clean`` no longer finds.
        """
        reach = limit + max((len(value) for value in self.secrets), default=0)
        if isinstance(text, bytes):
            text = text[: 4 * reach].decode("utf-8", errors="replace")  # a character is at most 4 bytes
        return self.clean(text[:reach])[:limit]


def request_body(template: Any, question: str, scope: Sequence[str] | None, record_id: str, *,
                 history: Sequence[Mapping[str, str]] = (), thread: str | None = None,
                 shape: str = "openai") -> Any:
    """The body template with its placeholders filled in, as JSON values.

    ``{question}``, ``{scope}`` and ``{id}`` are the record's; ``{history}`` the earlier
    turns as chat messages, ``{messages}`` those and the question as the last ``user``
    message; ``{thread}`` the conversation's thread id, null before a reply named one. A
    string that is exactly a placeholder becomes its value; inside a longer string a
    value is spliced in as text (a list as its JSON, null as nothing), in one pass, so a
    question that itself holds ``{id}`` is sent as written. ``shape`` is the target's
    ``message_shape``: ``openai`` messages as they come, ``langchain`` as LangChain's.
    """
    chat = [*history, {"role": "user", "content": question}]
    if shape == "langchain":
        chat = [{"type": _LANGCHAIN_TYPES[m["role"]], "content": m["content"]} for m in chat]
    else:
        chat = [{"role": m["role"], "content": m["content"]} for m in chat]
    values: dict[str, Any] = {
        "question": question, "scope": list(scope) if scope is not None else None, "id": record_id,
        "history": chat[:-1], "messages": chat, "thread": thread,
    }
    return _filled(template, values)


def _filled(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {k: _filled(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [_filled(v, values) for v in template]
    if not isinstance(template, str):
        return template
    whole = _PLACEHOLDER.fullmatch(template)
    if whole is not None:
        return values[whole.group(1)]

    def spliced(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        return value if isinstance(value, str) else "" if value is None else json.dumps(value)

    return _PLACEHOLDER.sub(spliced, template)


def _with_thread(text: str, thread: str | None, *, in_url: bool = False) -> str:
    """``text`` with ``{thread}`` as the thread id (quoted for a URL's path), or as nothing before there is one."""
    value = "" if thread is None else quote(thread, safe="") if in_url else thread
    return text.replace("{thread}", value)


def parse_server_timing(header: str | None) -> tuple[dict[str, float], int]:
    """Stage name → milliseconds from a ``Server-Timing`` header, and how many entries were dropped.

    An entry without a ``dur`` gives no time and is skipped. One whose name is not a
    token (letters, digits, ``_.-``, at most 64) or whose duration is not a number, not
    finite, negative or past a day is dropped and counted: it is no measurement, and a
    report must hold only finite, non-negative times.
    """
    stages: dict[str, float] = {}
    dropped = 0
    for entry in (header or "").split(","):
        name, *params = (p.strip() for p in entry.split(";"))
        durations = [value for key, _, value in (p.partition("=") for p in params) if key.strip().lower() == "dur"]
        if not name or not durations:
            continue
        try:
            duration = float(durations[0].strip().strip('"'))
        except ValueError:
            duration = math.nan
        if _TIMING_NAME.match(name) and math.isfinite(duration) and 0 <= duration <= _LONGEST_STAGE_MS:
            stages[name] = duration
        else:
            dropped += 1
    return stages, dropped


class _TooLarge(Exception):
    """A reply went past the target's byte cap: it is not read further."""


async def ask_target(
    session: aiohttp.ClientSession, endpoint: Endpoint | Target, question: str, scope: Sequence[str] | None,
    record_id: str, *, strict: bool | Callable[[], bool] = False,
    history: Sequence[Mapping[str, str]] = (), thread: str | None = None,
) -> RemoteTurn:
    """Ask the target one question and read its reply by the mapping; a fault ends the turn with ``error``.

    ``session`` is the run's aiohttp session, routed for the target (``net.connection.routed_session``).
    ``endpoint`` is the target opened once for the run (``Endpoint.open``; a bare target is
    opened here). ``strict`` raises ``TargetReplyError`` instead for a reply the mapping
    cannot read or an auth failure. It may be a function, asked when the reply has come:
    whether this reply is still the run's first.

    A follow-up passes its conversation: ``history``, the earlier turns as chat messages
    (``{"role": "user" | "assistant", "content": ...}``, first first), and ``thread``, the
    ``RemoteTurn.thread`` of the turn before it (None on a first turn).
    """
    endpoint = endpoint if isinstance(endpoint, Endpoint) else Endpoint.open(endpoint)
    target = endpoint.target
    first = strict if callable(strict) else (lambda: strict)
    template = target.thread_body if thread is not None and target.thread_body is not None else target.body
    body = request_body(template, question, scope, record_id, history=history, thread=thread,
                        shape=target.message_shape)
    url = endpoint.thread_url if thread is not None and endpoint.thread_url is not None else endpoint.url
    sent = {key: _with_thread(value, thread) for key, value in endpoint.headers.items()}
    sent = {key: value for key, value in sent.items() if value.strip()}  # a header of a thread not yet named
    sent.setdefault("Accept", "application/json" if target.reply.kind == "json" else
                    "text/event-stream" if target.reply.kind == "sse" else "application/x-ndjson")
    turn = RemoteTurn(truncated=None)  # a target gives no finish reason: whether it cut an answer is unknown
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    waited = None
    try:
        await _exchange(session, endpoint, _with_thread(url, thread, in_url=True), body, sent, turn, elapsed, first)
    except TimeoutError:
        turn.fail("timeout", f"{endpoint.url} sent no complete reply within timeout_s = {target.timeout_s:g} s; "
                             "fix: check the target's log, or raise the target's timeout_s")
        # The bound was waited out: a loop whose timers keep whole milliseconds (uvloop's) may fire a hair early.
        waited = max(elapsed(), target.timeout_s * 1000)
    except _TooLarge:
        turn.fail("reply_too_large", f"the reply of {endpoint.url} ran past max_reply_bytes = "
                                     f"{target.max_reply_bytes:,} and was not read further; fix: check the "
                                     "target's log, or raise the target's max_reply_bytes")
    except aiohttp.ClientPayloadError as exc:
        turn.fail("incomplete", f"the reply of {endpoint.url} was cut ({type(exc).__name__}: {exc}); "
                                "fix: check the target's log")
    except aiohttp.ClientError as exc:
        turn.fail("connect", f"no reply from {endpoint.url} ({type(exc).__name__}: {exc}); "
                        "fix: check the target's url and that it is running")
    if turn.thread is None:
        turn.thread = thread  # a reply that names no thread stays in the one it was asked in
    return _close(turn, endpoint, waited if waited is not None else elapsed())


async def _exchange(session: aiohttp.ClientSession, endpoint: Endpoint, url: str, body: Any, sent: dict[str, str],
                    turn: RemoteTurn, elapsed: Callable[[], float], first: Callable[[], bool]) -> None:
    """Send the question to ``url`` (again after a busy reply) and read the reply, each attempt within ``timeout_s``."""
    target = endpoint.target
    policy = RetryPolicy(target.retries)
    data = orjson.dumps(body)
    if not any(key.lower() == "content-type" for key in sent):
        sent = {**sent, "Content-Type": "application/json"}
    attempt = 0
    while True:
        async with asyncio.timeout(target.timeout_s), session.request(
                target.method, url, data=data, headers=sent) as response:
            turn.status = response.status
            if response.status in _BUSY and not policy.gives_up(attempt):
                await _capped_read(response, target)
                wait = policy.wait_s(attempt, parse_retry_after(response.headers.get("retry-after")))
            else:
                turn.server_timing, turn.stages_dropped = _stages(response, endpoint)
                if response.status != 200:
                    await _http_fault(turn, response, endpoint, first(), attempts=attempt + 1)
                else:
                    problem = await _READERS[target.reply.kind](turn, response, endpoint, elapsed)
                    if problem is None and target.reply.thread and turn.thread is None and first():
                        shown = _keys(turn.events[0].data) if turn.events else "nothing"
                        problem = f"has nothing at reply.thread {target.reply.thread!r}; it has {shown}"
                    if problem is not None:
                        _mapping_fault(turn, endpoint, problem, first())
                return
        await asyncio.sleep(wait)
        attempt += 1


def _stages(response: aiohttp.ClientResponse, endpoint: Endpoint) -> tuple[dict[str, float], int]:
    """The reply's `Server-Timing` stages and how many were dropped; a stage named by a secret is dropped too."""
    stages, dropped = parse_server_timing(response.headers.get("server-timing"))
    kept = {name: ms for name, ms in stages.items() if endpoint.clean(name) == name}
    return kept, dropped + len(stages) - len(kept)


async def _capped(response: aiohttp.ClientResponse, target: Target) -> AsyncIterator[bytes]:
    """The reply's bytes as they come, raising ``_TooLarge`` once more than ``max_reply_bytes`` came."""
    total = 0
    async for piece in response.content.iter_any():
        total += len(piece)
        if total > target.max_reply_bytes:
            raise _TooLarge
        yield piece


async def _capped_read(response: aiohttp.ClientResponse, target: Target) -> bytes:
    """The whole reply, up to ``max_reply_bytes`` (``_TooLarge`` past it)."""
    held = bytearray()
    async for piece in _capped(response, target):
        held += piece
    return bytes(held)


async def _http_fault(turn: RemoteTurn, response: aiohttp.ClientResponse, endpoint: Endpoint, strict: bool,
                      *, attempts: int = 1) -> None:
    raw = (await _capped_read(response, endpoint.target)).decode("utf-8", errors="replace")
    excerpt = endpoint.excerpt(" ".join(raw.split()))
    status, url = response.status, endpoint.url
    if status in (401, 403):
        message = (f"HTTP {status} from {url}: {excerpt}; "
                   "fix: check the target's headers and the environment variables they read")
        if strict:
            raise TargetReplyError(endpoint.clean(message.split("; fix: ")[0]),
                                   hint="check the target's headers and the environment variables they read")
        turn.fail("auth", message)
        return
    if status in _BUSY:
        busy = "rate limiting" if status == 429 else "unavailable"
        turn.fail("rate_limit" if status == 429 else "http_status",
                  f"HTTP {status} from {url}: {excerpt} (gave up after {attempts} attempts); "
                  f"fix: the target is {busy}; lower model.concurrency, or raise the target's retries")
        return
    turn.fail("http_status", f"HTTP {status} from {url}: {excerpt}; fix: see the target's log")


def _mapping_fault(turn: RemoteTurn, endpoint: Endpoint, problem: str, strict: bool) -> None:
    turn.answer = ""
    problem = endpoint.clean(problem)
    if strict:
        raise TargetReplyError(endpoint.clean(f"the reply of {endpoint.url} (HTTP {turn.status}) {problem}"),
                               hint="fix the target's reply mapping; `docpilot golden check --target NAME` "
                                    "shows a sample reply and what each path matched")
    turn.fail("malformed", f"the reply of {endpoint.url} {problem}; fix: check the target's reply mapping")


def _keys(value: Any) -> str:
    """The shape of a reply in a few words: its keys, one level deep."""
    if isinstance(value, dict):
        parts = []
        for key, inner in list(value.items())[:20]:
            parts.append(f"{key}{{{', '.join(map(str, list(inner)[:20]))}}}" if isinstance(inner, dict) and inner
                         else str(key))
        return "keys " + ", ".join(parts) if parts else "no keys"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return _a(_kind(value))


def _kind(value: Any) -> str:
    """A JSON value's type as a reader of JSON names it."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _json(raw: str | bytes) -> Any:
    """A reply's JSON as values, each lone surrogate in its text made U+FFFD.

    JSON may escape half of a surrogate pair (``"\\ud800"``) and UTF-8 cannot hold one: a
    row quoting it could not be written, and the whole report would be lost.
    """
    return _whole(json.loads(raw))


def _whole(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, list):
        return [_whole(item) for item in value]
    if isinstance(value, dict):
        return {_whole(key): _whole(item) for key, item in value.items()}
    return value


def _search(expression: str, data: Any) -> Any:
    return jmespath.search(expression, data)


class _Shape(Exception):
    """A reply field of the wrong JSON type: the message names the path, the type found and the type wanted."""


def _items_at(field: str, expression: str | None, data: Any) -> list | None:
    """The list ``expression`` finds in ``data``; None when unset or unmatched; ``_Shape`` for another type."""
    found = _search(expression, data) if expression else None
    if found is None:
        return None
    if not isinstance(found, list):
        raise _Shape(f"has {_a(_kind(found))} at reply.{field} {expression!r}, where a list is wanted")
    return found


def _take_sources(turn: RemoteTurn, endpoint: Endpoint, data: Any) -> bool:
    """Map the sources ``data`` holds into the turn's ranking; whether the sources path matched."""
    target, reply = endpoint.target, endpoint.target.reply
    items = _items_at("sources", reply.sources, data)
    if items is None:
        return False
    if len(items) > target.max_sources:
        turn.fail("reply_too_large", f"the reply of {endpoint.url} returned {len(items):,} sources, past "
                                     f"max_sources = {target.max_sources:,}; fix: check the target's log, or "
                                     "raise the target's max_sources")
        items = items[: target.max_sources]
    hits, primed, outside = [], [], []
    for n, item in enumerate(items, start=1):
        name = source_name(item, reply.source_id, target.source_ids)
        if name is None:
            continue
        place = endpoint.docs.resolve(name) if endpoint.docs is not None else None
        sid = endpoint.clean(place.id if place is not None else name.mapped)
        if place is not None and place.level == "outside":
            outside.append(sid)
        hits.append(RankedHit(section_id=sid, chunk_id=sid, score=0.0))
        primed.append(PrimedSource(n=n, section_id=sid, title=sid, url=endpoint.excerpt(name.given, 2000)))
    turn.retrieval = RetrievalEvent(hits=hits, primed=primed)
    turn.outside_docs = outside
    return True


def _take_citations(turn: RemoteTurn, endpoint: Endpoint, data: Any) -> bool:
    """Read what the answer cites from ``data`` into ``turn.cited``; whether the citations path matched."""
    items = _items_at("citations", endpoint.target.reply.citations, data)
    if items is None:
        return False
    turn.cited = [_citation_label(item, endpoint) for item in items[: endpoint.target.max_sources]]
    return True


def _citation_label(item: Any, endpoint: Endpoint) -> str:
    """One cited item as a marker's label: a number as its digits, a source as its section id.

    A source that maps to no section id (an object without the ``source_id`` field) keeps
    its JSON, so the row shows what was cited that named no returned source.
    """
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    target = endpoint.target
    name = source_name(item, target.reply.source_id, target.source_ids)
    if name is None:
        return endpoint.excerpt(json.dumps(item, sort_keys=True))
    return endpoint.clean(endpoint.docs.resolve(name).id if endpoint.docs is not None else name.mapped)


def _take_thread(turn: RemoteTurn, target: Target, data: Any) -> None:
    """The thread id ``reply.thread`` finds in ``data``, into ``turn.thread``; ``_Shape`` for anything but
    a string or a number."""
    found = _search(target.reply.thread, data) if target.reply.thread and turn.thread is None else None
    if found is None:
        return
    if isinstance(found, bool) or not isinstance(found, (str, int)):
        raise _Shape(f"has {_a(_kind(found))} at reply.thread {target.reply.thread!r}, where a thread id "
                     "(text or a number) is wanted")
    turn.thread = str(found)


def _take_refusal(turn: RemoteTurn, target: Target, data: Any) -> None:
    if target.reply.refusal and _search(target.reply.refusal, data):
        turn.refusal = RefusalEvent(refused_by="model", cause="not-answerable", reply=None)


def _text_at(expression: str, data: Any) -> str | None:
    """The answer text ``expression`` finds; None when it finds nothing; ``_Shape`` for anything but text."""
    found = _search(expression, data)
    if found is None or isinstance(found, str):
        return found
    raise _Shape(f"has {_a(_kind(found))} at reply.answer {expression!r}, where text is wanted")


async def _read_json(turn: RemoteTurn, response: aiohttp.ClientResponse, endpoint: Endpoint,
                     elapsed: Callable[[], float]) -> str | None:
    target = endpoint.target
    raw = await _capped_read(response, target)
    turn.latency_ms = elapsed()
    try:
        data = _json(raw)
    except (ValueError, RecursionError):
        kind = response.headers.get("content-type", "no content type")
        return f"is not JSON ({kind}: {endpoint.excerpt(raw)!r})"
    turn.events.append(RemoteEvent(name="reply", data=data if isinstance(data, dict) else {"value": data},
                                   at_ms=turn.latency_ms))
    try:
        _take_refusal(turn, target, data)
        _take_thread(turn, target, data)
        answer = _text_at(target.reply.answer, data) if target.reply.answer is not None else None
        if answer is None and turn.refusal is None and target.reply.answer is not None:
            return f"has nothing at reply.answer {target.reply.answer!r}; it has {_keys(data)}"
        if target.reply.sources and not _take_sources(turn, endpoint, data):
            return f"has nothing at reply.sources {target.reply.sources!r}; it has {_keys(data)}"
        if target.reply.citations and not _take_citations(turn, endpoint, data):
            return f"has nothing at reply.citations {target.reply.citations!r}; it has {_keys(data)}"
    except _Shape as shape:
        return str(shape)
    turn.answer = "" if answer is None else answer
    return None


class _Stream:
    """What a streamed reply has shown so far: whether deltas, sources, citations and its end arrived."""

    def __init__(self) -> None:
        self.deltas = 0
        self.matched = 0
        self.sources = False
        self.citations = False
        self.ended = False
        self.first: Any = None
        self.names: list[str] = []
        self.shape: str | None = None

    def problem(self, target: Target) -> str | None:
        reply = target.reply
        if self.shape is not None:
            return self.shape
        if self.deltas and not self.matched and not reply.refusal:
            return f"has nothing at reply.answer {reply.answer!r} in its deltas; the first has {_keys(self.first)}"
        if not self.deltas and reply.kind == "sse":
            seen = ", ".join(list(dict.fromkeys(self.names))[:20]) or "none"
            return f"sent no {reply.delta_event!r} event (reply.delta_event); the events it sent: {seen}"
        if reply.sources and not self.sources:
            return f"has nothing at reply.sources {reply.sources!r}; its first delta has {_keys(self.first)}"
        if reply.citations and not self.citations:
            return f"has nothing at reply.citations {reply.citations!r}; its first delta has {_keys(self.first)}"
        return None


def _take_delta(turn: RemoteTurn, endpoint: Endpoint, stream: _Stream, data: Any, now_ms: float,
                *, carries_sources: bool, carries_citations: bool, carries_delta: bool,
                carries_thread: bool = True) -> None:
    target = endpoint.target
    try:
        if carries_sources and not stream.sources:
            stream.sources = _take_sources(turn, endpoint, data)
        if carries_citations and not stream.citations:
            stream.citations = _take_citations(turn, endpoint, data)
        if carries_thread:
            _take_thread(turn, target, data)
        _take_refusal(turn, target, data)
        text = _text_at(target.reply.answer, data) if carries_delta else None  # type: ignore[arg-type]
    except _Shape as shape:
        stream.shape = stream.shape or str(shape)
        return
    if not carries_delta:
        return
    stream.deltas += 1
    if stream.first is None:
        stream.first = data
    if text is not None:
        stream.matched += 1
        turn.answer += text
        if turn.first_token_ms is None and paints(text):
            turn.first_token_ms = now_ms


async def _read_sse(turn: RemoteTurn, response: aiohttp.ClientResponse, endpoint: Endpoint,
                    elapsed: Callable[[], float]) -> str | None:
    reply, stream, reader = endpoint.target.reply, _Stream(), EventReader(dataless=True)
    sources_event = reply.sources_event or reply.delta_event
    citations_event = reply.citations_event or sources_event
    read = {reply.delta_event, sources_event, citations_event}
    thread_events = {reply.thread_event} if reply.thread_event else read
    pieces = _capped(response, endpoint.target)
    async for piece in pieces:
        for name, raw in reader.feed_named(piece):
            now = elapsed()
            stream.names.append(name)
            if name == reply.end_event or (name == "message" and raw.strip() == "[DONE]"):
                stream.ended, turn.latency_ms = True, now  # `[DONE]`: how OpenAI-style streams end
                break
            if name not in read | thread_events:
                continue
            try:
                data = _json(raw)
            except (ValueError, RecursionError):
                return f"sent a {name!r} event that is not JSON: {endpoint.excerpt(raw)!r}"
            turn.events.append(RemoteEvent(name=name, data=data if isinstance(data, dict) else {"value": data},
                                           at_ms=now))
            _take_delta(turn, endpoint, stream, data, now, carries_sources=name == sources_event,
                        carries_citations=name == citations_event, carries_delta=name == reply.delta_event,
                        carries_thread=name in thread_events)
        if stream.ended:
            await _drain(pieces)
            break
    if reply.end_event is not None and not stream.ended:
        turn.fail("incomplete", f"the stream of {endpoint.url} ended before its {reply.end_event!r} event; "
                                "fix: check the target's log, or reply.end_event")
    return stream.problem(endpoint.target)


async def _lines(pieces: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of a byte stream, decoded; the bytes under them are capped by ``_capped``."""
    held = b""
    async for piece in pieces:
        held += piece
        *done, held = held.split(b"\n")
        for line in done:
            yield line.decode("utf-8", errors="replace")
    if held:
        yield held.decode("utf-8", errors="replace")


async def _read_ndjson(turn: RemoteTurn, response: aiohttp.ClientResponse, endpoint: Endpoint,
                       elapsed: Callable[[], float]) -> str | None:
    reply, stream = endpoint.target.reply, _Stream()
    lines = _lines(_capped(response, endpoint.target))
    async for line in lines:
        if not line.strip():
            continue
        now = elapsed()
        try:
            data = _json(line)
        except (ValueError, RecursionError):
            return f"sent a line that is not JSON: {endpoint.excerpt(line)!r}"
        turn.events.append(RemoteEvent(name="line", data=data if isinstance(data, dict) else {"value": data},
                                       at_ms=now))
        if reply.end and _search(reply.end, data):
            stream.ended, turn.latency_ms = True, now
            _take_delta(turn, endpoint, stream, data, now, carries_sources=True, carries_citations=True,
                        carries_delta=False)
            await _drain(lines)
            break
        _take_delta(turn, endpoint, stream, data, now, carries_sources=True, carries_citations=True,
                    carries_delta=True)
    if reply.end is not None and not stream.ended:
        turn.fail("incomplete", f"the stream of {endpoint.url} ended before a line matching reply.end "
                                f"{reply.end!r}; fix: check the target's log")
    return stream.problem(endpoint.target)


_READERS = {"json": _read_json, "sse": _read_sse, "ndjson": _read_ndjson}
_DRAIN_S = 0.5
"""How long what a stream sends after the end of its turn is read, so its connection can serve the next question."""


async def _drain(rest: AsyncIterator[Any]) -> None:
    """Read a stream's remainder once its turn has ended: most often only the body's last, empty chunk.

    A response left unread is closed with its connection, so every question would open
    a new one (a TCP handshake, and TLS's, each time). A stream still open after
    ``_DRAIN_S`` (one that keeps sending after its end), or past the byte cap, is closed
    as before; the turn's latency was taken at its end, so the wait is never counted.
    """
    async def read() -> None:
        async for _ in rest:
            pass

    try:
        await asyncio.wait_for(read(), _DRAIN_S)
    except (TimeoutError, aiohttp.ClientError, _TooLarge):
        pass


def _close(turn: RemoteTurn, endpoint: Endpoint, now_ms: float) -> RemoteTurn:
    if turn.latency_ms is None or turn.error_code == "timeout":
        turn.latency_ms = now_ms
    turn.answer = endpoint.clean(turn.answer.strip())
    if turn.error is None and turn.refusal is None and endpoint.target.reply.answer is not None:
        cause = parse_refusal(turn.answer)
        if cause is not None:
            turn.refusal = RefusalEvent(refused_by="model", cause=cause, reply=turn.answer)
        elif not paints(turn.answer):
            turn.fail("empty", f"the reply of {endpoint.url} had no answer text and no refusal; "
                               "fix: check the target's log and reply.answer")
    if turn.error is not None:
        turn.answer = ""
        turn.error = endpoint.clean(turn.error)
    if turn.first_token_ms is None:
        turn.first_token_ms = turn.latency_ms  # nothing painted early: the wait was the whole turn
    return turn
