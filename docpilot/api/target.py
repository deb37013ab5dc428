"""Asking a target: an assistant DocPilot did not build, its request and reply mapped in config.

``ask_target`` sends one record's question as the target's body template says and reads
the reply as its ``reply`` mapping says (a JSON document, an SSE stream or NDJSON
lines, each field a JMESPath expression), into the same ``RemoteTurn`` DocPilot's own
client returns, timed the same way with a monotonic clock started just before the
request is sent:

    latency_ms        send → the whole reply (or its end event)
    first_token_ms    send → the first delta with more than white space; a JSON reply's latency
    server_timing     the reply's ``Server-Timing`` header (``retrieve;dur=12.3, model;dur=80``)

The returned sources, in their order, become the ranking and the numbered sources the
answer's ``[n]`` markers cite; each is mapped to a section id by ``section_id``. A
target whose mapping names no sources gives no ranking: ``RemoteTurn.retrieval`` is None.
A mapping with ``citations`` reads what the answer cites from the reply instead of its
markers, into ``RemoteTurn.cited``: a number as its digits, a source as its section id.

A 429 or 503 is asked again, as ``docpilot.net.retry`` says (the target's ``retries``
times, after its ``Retry-After`` up to a cap, else a doubling backoff); the waits count
in the latency, as a user would wait them. Past the last retry the turn is an error
naming the status.

A reply the mapping cannot read (an answer path that matches nothing, a body that is
not JSON) or an auth failure (401, 403) is a fault of the config, not of one answer:
with ``strict`` (the run's first reply) it raises ``TargetReplyError``, naming the
path, the status and the keys the reply did have; otherwise it ends the turn with an
error. Nothing is stored as an answer either way.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import jmespath

from docpilot.api.client import RemoteEvent, RemoteTurn
from docpilot.api.schema import PrimedSource, RankedHit, RefusalEvent, RetrievalEvent
from docpilot.config.target import SourceMapping, Target
from docpilot.errors import ConfigError
from docpilot.models.base import paints, parse_refusal
from docpilot.net.retry import RetryPolicy, parse_retry_after
from docpilot.net.sse import EventReader

__all__ = [
    "TargetReplyError", "ask_target", "parse_server_timing", "request_body", "request_headers", "section_id",
]

_EXCERPT = 200
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDERS = ("question", "scope", "id")
_BUSY = (429, 503)
"""Statuses that say the target is busy for now: asked again, by the target's retry policy."""


class TargetReplyError(ConfigError):
    """The target's first reply could not be read by its mapping, or it refused the credentials."""


def request_headers(target: Target, name: str = "target") -> dict[str, str]:
    """The target's headers with each ``${NAME}`` read from the environment; ConfigError names a missing one."""
    headers: dict[str, str] = {}
    for key, value in target.headers.items():
        def variable(match: re.Match[str], key: str = key) -> str:
            found = os.environ.get(match.group(1))
            if found is None:
                raise ConfigError(f"targets.{name}.headers.{key} reads ${{{match.group(1)}}}, which is not set",
                                  hint=f"export {match.group(1)}=... before the run")
            return found

        headers[key] = _VARIABLE.sub(variable, value)
    return headers


def request_body(template: Any, question: str, scope: Sequence[str] | None, record_id: str) -> Any:
    """The body template with ``{question}``, ``{scope}`` and ``{id}`` filled in, as JSON values."""
    values: dict[str, Any] = {"question": question, "scope": list(scope) if scope is not None else None,
                              "id": record_id}
    if isinstance(template, dict):
        return {k: request_body(v, question, scope, record_id) for k, v in template.items()}
    if isinstance(template, list):
        return [request_body(v, question, scope, record_id) for v in template]
    if not isinstance(template, str):
        return template
    for name in _PLACEHOLDERS:
        if template == "{" + name + "}":
            return values[name]
    for name in _PLACEHOLDERS:
        value = values[name]
        template = template.replace("{" + name + "}", value if isinstance(value, str) else json.dumps(value))
    return template


def section_id(source: Any, mapping: SourceMapping) -> str | None:
    """The DocPilot section id of one returned source (a URL, a path or an id); None when it is empty.

    The base URL (else a URL's scheme and host) and the prefix are stripped, then a
    suffix (``.html``, ``.md``, ``/``) and a trailing index page: the rest is the page
    id. A ``#anchor`` is the section; without one the source names the page's
    opening text, ``page#``, which a gold entry of the page matches.
    """
    if source is None or isinstance(source, (dict, list)):
        return None
    text = str(source).strip()
    if mapping.base_url and text.startswith(mapping.base_url):
        text = text[len(mapping.base_url):]
    elif "://" in text:
        parts = urlsplit(text)
        text = parts.path + (f"#{parts.fragment}" if parts.fragment else "")
    page, _, anchor = text.partition("#")
    page = page.split("?", 1)[0].lstrip("/")
    prefix = mapping.prefix.lstrip("/")
    if prefix and page.startswith(prefix):
        page = page[len(prefix):]
    for suffix in mapping.suffixes:
        if page.endswith(suffix):
            page = page[: -len(suffix)]
            break
    page = page.strip("/")
    if page == mapping.index:
        page = ""
    elif page.endswith("/" + mapping.index):
        page = page[: -len(mapping.index) - 1]
    if not page and not anchor:
        page = mapping.index
    return f"{page or mapping.index}#{anchor}"


def parse_server_timing(header: str | None) -> dict[str, float]:
    """Stage name → milliseconds from a ``Server-Timing`` header; entries without a ``dur`` are skipped."""
    stages: dict[str, float] = {}
    for entry in (header or "").split(","):
        name, *params = (p.strip() for p in entry.split(";"))
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "dur" and name:
                try:
                    stages[name] = float(value.strip().strip('"'))
                except ValueError:
                    pass
    return stages


async def ask_target(
    client: httpx.AsyncClient, target: Target, question: str, scope: Sequence[str] | None, record_id: str,
    *, headers: dict[str, str] | None = None, strict: bool | Callable[[], bool] = False,
) -> RemoteTurn:
    """Ask the target one question and read its reply by the mapping; a fault ends the turn with ``error``.

    ``headers`` are the target's, already resolved (``request_headers``); ``strict``
    raises ``TargetReplyError`` instead for a reply the mapping cannot read or an auth failure.
    It may be a function, asked when the reply has come: whether this reply is still the run's first.
    """
    first = strict if callable(strict) else (lambda: strict)
    body = request_body(target.body, question, scope, record_id)
    sent = dict(headers if headers is not None else request_headers(target))
    sent.setdefault("Accept", "application/json" if target.reply.kind == "json" else
                    "text/event-stream" if target.reply.kind == "sse" else "application/x-ndjson")
    turn = RemoteTurn()
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    policy = RetryPolicy(target.retries)
    attempt = 0
    try:
        while True:
            async with client.stream(target.method, target.url, json=body, headers=sent,
                                     timeout=target.timeout_s) as response:
                turn.status = response.status_code
                if response.status_code in _BUSY and not policy.gives_up(attempt):
                    await response.aread()
                    await asyncio.sleep(policy.wait_s(attempt, parse_retry_after(response.headers.get("retry-after"))))
                    attempt += 1
                    continue
                turn.server_timing = parse_server_timing(response.headers.get("server-timing"))
                if response.status_code != 200:
                    await _http_fault(turn, response, target, first(), attempts=attempt + 1)
                else:
                    reader = _READERS[target.reply.kind]
                    problem = await reader(turn, response, target, elapsed)
                    if problem is not None:
                        _mapping_fault(turn, target, problem, first())
            break
    except httpx.HTTPError as exc:
        code = "timeout" if isinstance(exc, httpx.TimeoutException) else "connect"
        turn.fail(code, f"no reply from {target.url} ({type(exc).__name__}: {exc}); "
                        "fix: check the target's url and that it is running")
    return _close(turn, target, elapsed())


async def _http_fault(turn: RemoteTurn, response: httpx.Response, target: Target, strict: bool,
                      *, attempts: int = 1) -> None:
    raw = (await response.aread()).decode("utf-8", errors="replace")
    excerpt = " ".join(raw.split())[:_EXCERPT]
    status = response.status_code
    if status in (401, 403):
        message = (f"HTTP {status} from {target.url}: {excerpt}; "
                   "fix: check the target's headers and the environment variables they read")
        if strict:
            raise TargetReplyError(message.split("; fix: ")[0],
                                   hint="check the target's headers and the environment variables they read")
        turn.fail("auth", message)
        return
    if status in _BUSY:
        busy = "rate limiting" if status == 429 else "unavailable"
        turn.fail("rate_limit" if status == 429 else "http_status",
                  f"HTTP {status} from {target.url}: {excerpt} (gave up after {attempts} attempts); "
                  f"fix: the target is {busy}; lower model.concurrency, or raise the target's retries")
        return
    turn.fail("http_status", f"HTTP {status} from {target.url}: {excerpt}; fix: see the target's log")


def _mapping_fault(turn: RemoteTurn, target: Target, problem: str, strict: bool) -> None:
    turn.answer = ""
    if strict:
        raise TargetReplyError(f"the reply of {target.url} (HTTP {turn.status}) {problem}",
                               hint="fix the target's reply mapping; `docpilot golden check --target NAME` "
                                    "shows a sample reply and what each path matched")
    turn.fail("malformed", f"the reply of {target.url} {problem}; fix: check the target's reply mapping")


def _keys(value: Any) -> str:
    """The shape of a reply in a few words: its keys, one level deep."""
    if isinstance(value, dict):
        parts = []
        for key, inner in value.items():
            parts.append(f"{key}{{{', '.join(map(str, inner))}}}" if isinstance(inner, dict) and inner else str(key))
        return "keys " + ", ".join(parts) if parts else "no keys"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def _search(expression: str, data: Any) -> Any:
    return jmespath.search(expression, data)


def _items_at(expression: str | None, data: Any) -> list | None:
    """What ``expression`` finds in ``data`` as a list (a single match is a list of one); None when unset or unmatched."""
    found = _search(expression, data) if expression else None
    if found is None:
        return None
    return found if isinstance(found, list) else [found]


def _take_sources(turn: RemoteTurn, target: Target, data: Any) -> bool:
    """Map the sources ``data`` holds into the turn's ranking; whether the sources path matched."""
    reply = target.reply
    items = _items_at(reply.sources, data)
    if items is None:
        return False
    ids = [section_id(_search(reply.source_id, item), target.source_ids) for item in items]
    hits, primed = [], []
    for n, (item, sid) in enumerate(zip(items, ids, strict=True), start=1):
        if sid is None:
            continue
        url = item if isinstance(item, str) else str(_search(reply.source_id, item))
        hits.append(RankedHit(section_id=sid, chunk_id=sid, score=0.0))
        primed.append(PrimedSource(n=n, section_id=sid, title=sid, url=url))
    turn.retrieval = RetrievalEvent(hits=hits, primed=primed)
    return True


def _take_citations(turn: RemoteTurn, target: Target, data: Any) -> bool:
    """Read what the answer cites from ``data`` into ``turn.cited``; whether the citations path matched."""
    items = _items_at(target.reply.citations, data)
    if items is None:
        return False
    turn.cited = [_citation_label(item, target) for item in items]
    return True


def _citation_label(item: Any, target: Target) -> str:
    """One cited item as a marker's label: a number as its digits, a source as its section id.

    A source that maps to no section id (an object without the ``source_id`` field) keeps
    its JSON, so the row shows what was cited that named no returned source.
    """
    if isinstance(item, int) and not isinstance(item, bool):
        return str(item)
    found = section_id(_search(target.reply.source_id, item), target.source_ids)
    return found if found is not None else json.dumps(item, sort_keys=True)[:_EXCERPT]


def _take_refusal(turn: RemoteTurn, target: Target, data: Any) -> None:
    if target.reply.refusal and _search(target.reply.refusal, data):
        turn.refusal = RefusalEvent(refused_by="model", cause="not-answerable", reply=None)


async def _read_json(turn: RemoteTurn, response: httpx.Response, target: Target,
                     elapsed: Callable[[], float]) -> str | None:
    raw = await response.aread()
    turn.latency_ms = elapsed()
    try:
        data = json.loads(raw)
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        return f"is not JSON ({kind}: {raw[:_EXCERPT].decode('utf-8', errors='replace')!r})"
    turn.events.append(RemoteEvent(name="reply", data=data if isinstance(data, dict) else {"value": data},
                                   at_ms=turn.latency_ms))
    _take_refusal(turn, target, data)
    answer = _search(target.reply.answer, data)  # type: ignore[arg-type]
    if answer is None and turn.refusal is None:
        return f"has nothing at reply.answer {target.reply.answer!r}; it has {_keys(data)}"
    if target.reply.sources and not _take_sources(turn, target, data):
        return f"has nothing at reply.sources {target.reply.sources!r}; it has {_keys(data)}"
    if target.reply.citations and not _take_citations(turn, target, data):
        return f"has nothing at reply.citations {target.reply.citations!r}; it has {_keys(data)}"
    turn.answer = "" if answer is None else str(answer)
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

    def problem(self, target: Target) -> str | None:
        reply = target.reply
        if self.deltas and not self.matched and not reply.refusal:
            return f"has nothing at reply.answer {reply.answer!r} in its deltas; the first has {_keys(self.first)}"
        if not self.deltas and reply.kind == "sse":
            seen = ", ".join(dict.fromkeys(self.names)) or "none"
            return f"sent no {reply.delta_event!r} event (reply.delta_event); the events it sent: {seen}"
        if reply.sources and not self.sources:
            return f"has nothing at reply.sources {reply.sources!r}; its first delta has {_keys(self.first)}"
        if reply.citations and not self.citations:
            return f"has nothing at reply.citations {reply.citations!r}; its first delta has {_keys(self.first)}"
        return None


def _take_delta(turn: RemoteTurn, target: Target, stream: _Stream, data: Any, now_ms: float,
                *, carries_sources: bool, carries_citations: bool, carries_delta: bool) -> None:
    if carries_sources and not stream.sources:
        stream.sources = _take_sources(turn, target, data)
    if carries_citations and not stream.citations:
        stream.citations = _take_citations(turn, target, data)
    _take_refusal(turn, target, data)
    if not carries_delta:
        return
    stream.deltas += 1
    if stream.first is None:
        stream.first = data
    text = _search(target.reply.answer, data)  # type: ignore[arg-type]
    if isinstance(text, str):
        stream.matched += 1
        turn.answer += text
        if turn.first_token_ms is None and paints(text):
            turn.first_token_ms = now_ms


async def _read_sse(turn: RemoteTurn, response: httpx.Response, target: Target,
                    elapsed: Callable[[], float]) -> str | None:
    reply, stream, reader = target.reply, _Stream(), EventReader(dataless=True)
    sources_event = reply.sources_event or reply.delta_event
    citations_event = reply.citations_event or sources_event
    pieces = response.aiter_bytes()
    async for piece in pieces:
        for name, raw in reader.feed_named(piece):
            now = elapsed()
            stream.names.append(name)
            if name == reply.end_event or (name == "message" and raw.strip() == "[DONE]"):
                stream.ended, turn.latency_ms = True, now  # `[DONE]`: how OpenAI-style streams end
                break
            if name not in (reply.delta_event, sources_event, citations_event):
                continue
            try:
                data = json.loads(raw)
            except ValueError:
                return f"sent a {name!r} event that is not JSON: {raw[:_EXCERPT]!r}"
            turn.events.append(RemoteEvent(name=name, data=data if isinstance(data, dict) else {"value": data},
                                           at_ms=now))
            _take_delta(turn, target, stream, data, now, carries_sources=name == sources_event,
                        carries_citations=name == citations_event, carries_delta=name == reply.delta_event)
        if stream.ended:
            await _drain(pieces)
            break
    if reply.end_event is not None and not stream.ended:
        turn.fail("incomplete", f"the stream of {target.url} ended before its {reply.end_event!r} event; "
                                "fix: check the target's log, or reply.end_event")
    return stream.problem(target)


async def _read_ndjson(turn: RemoteTurn, response: httpx.Response, target: Target,
                       elapsed: Callable[[], float]) -> str | None:
    reply, stream = target.reply, _Stream()
    lines = response.aiter_lines()
    async for line in lines:
        if not line.strip():
            continue
        now = elapsed()
        try:
            data = json.loads(line)
        except ValueError:
            return f"sent a line that is not JSON: {line[:_EXCERPT]!r}"
        turn.events.append(RemoteEvent(name="line", data=data if isinstance(data, dict) else {"value": data},
                                       at_ms=now))
        if reply.end and _search(reply.end, data):
            stream.ended, turn.latency_ms = True, now
            _take_delta(turn, target, stream, data, now, carries_sources=True, carries_citations=True,
                        carries_delta=False)
            await _drain(lines)
            break
        _take_delta(turn, target, stream, data, now, carries_sources=True, carries_citations=True, carries_delta=True)
    if reply.end is not None and not stream.ended:
        turn.fail("incomplete", f"the stream of {target.url} ended before a line matching reply.end "
                                f"{reply.end!r}; fix: check the target's log")
    return stream.problem(target)


_READERS = {"json": _read_json, "sse": _read_sse, "ndjson": _read_ndjson}
_DRAIN_S = 0.5
"""How long what a stream sends after the end of its turn is read, so its connection can serve the next question."""


async def _drain(rest: AsyncIterator[Any]) -> None:
    """Read a stream's remainder once its turn has ended: most often only the body's last, empty chunk.

    A response left unread is closed with its connection, so every question would open
    a new one (a TCP handshake, and TLS's, each time). A stream still open after
    ``_DRAIN_S`` (one that keeps sending after its end) is closed as before; the turn's
    latency was taken at its end, so the wait is never counted.
    """
    async def read() -> None:
        async for _ in rest:
            pass

    try:
        await asyncio.wait_for(read(), _DRAIN_S)
    except (TimeoutError, httpx.HTTPError):
        pass


def _close(turn: RemoteTurn, target: Target, now_ms: float) -> RemoteTurn:
    if turn.latency_ms is None:
        turn.latency_ms = now_ms
    turn.answer = turn.answer.strip()
    if turn.error is None and turn.refusal is None:
        cause = parse_refusal(turn.answer)
        if cause is not None:
            turn.refusal = RefusalEvent(refused_by="model", cause=cause, reply=turn.answer)
        elif not paints(turn.answer):
            turn.fail("empty", f"the reply of {target.url} had no answer text and no refusal; "
                               "fix: check the target's log and reply.answer")
    if turn.error is not None:
        turn.answer = ""
    if turn.first_token_ms is None:
        turn.first_token_ms = turn.latency_ms  # nothing painted early: the wait was the whole turn
    return turn


def sample_reply(target: Target, name: str, question: str, scope: Sequence[str] | None,
                 record_id: str) -> RemoteTurn:
    """Ask the target one question, as a run would, and return the turn (a fault is its ``error``)."""
    import asyncio

    headers = request_headers(target, name)

    async def one() -> RemoteTurn:
        async with httpx.AsyncClient() as client:
            return await ask_target(client, target, question, scope, record_id, headers=headers)

    return asyncio.run(one())


def describe_sample(turn: RemoteTurn, target: Target, known: Callable[[str], bool]) -> dict[str, Any]:
    """What a sample reply gave by the mapping: each field matched or not, each source's id and whether the docs
    have it (``known``), the stage times and first token, so a config can be fixed before a run."""
    reply = target.reply
    sources = turn.retrieval.primed if turn.retrieval is not None else []
    first = turn.events[0].data if turn.events else None
    return {
        "url": target.url, "status": turn.status, "error": turn.error,
        "reply_has": _keys(first) if first is not None else None,
        "fields": {
            "answer": {"path": reply.answer, "matched": bool(turn.answer), "value": turn.answer[:_EXCERPT]},
            "sources": {"path": reply.sources, "matched": turn.retrieval is not None, "count": len(sources)},
            "refusal": {"path": reply.refusal, "refused": turn.refusal is not None},
        },
        "citations": {"path": reply.citations, "matched": turn.cited is not None, "cited": turn.cited or []},
        "sources": [{"n": s.n, "source": s.url, "section_id": s.section_id, "in_docs": known(s.section_id)}
                    for s in sources],
        "latency_ms": turn.latency_ms, "first_token_ms": turn.first_token_ms, "server_timing": turn.server_timing,
    }
