"""The HTTP API's shapes: what a client sends, every event it gets back, and the OpenAPI document.

The server writes these models and ``docpilot.api.client`` reads them, so the wire format
is defined once. Nothing here imports the web framework: a client needs only pydantic.
One question, streamed (``POST /v1/ask`` with ``stream: true``), is a series of
server-sent events, each ``event: <name>`` with one JSON object as ``data``:

    retrieval   ranked sections and the primed sources          always, first
    thought     a piece of the model's reasoning                 0..n
    token       a piece of the answer text                       0..n
    citations   the rendered panel: markers, links, Sources      when answered
    refusal     who refused (gate or model) and why              when refused
    error       a failure, with a message safe to show           when failed
    timing      where the server's time went                     always
    done        the end of the turn                              always, last

With ``stream: false`` the same facts come back as one ``AskResult`` object.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import models_json_schema

from docpilot import __version__
from docpilot.assistant.render import Panel
from docpilot.json_schema import DocumentedSchema

# MAX_QUESTION_CHARS, the longest question a request may ask, is the golden set's limit too.
from docpilot.schema import MAX_QUESTION_CHARS, Cause  # noqa: F401

MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted; a larger one is answered 413. It holds a question, its scope and a
follow-up's earlier turns."""
MAX_SCOPE_ENTRIES = 50
"""Most page-id prefixes a scope may list."""
MAX_HISTORY_MESSAGES = 40
"""Most earlier messages a request's ``history`` may hold (the prompt carries the latest of them, as
``docpilot.assistant.primer.bounded_history`` bounds it)."""
MAX_HISTORY_MESSAGE_CHARS = 8000
"""Longest earlier message a request's ``history`` may hold, in characters."""
TOKEN_VARIABLE = "DOCPILOT_SERVER_TOKEN"
"""Environment variable that holds the server's bearer token (for the server and its clients)."""
REFUSAL_MESSAGE = "The documentation does not answer this question."
"""What a reader is shown instead of an answer when the turn is refused."""
EVENT_NAMES = ("retrieval", "thought", "token", "citations", "refusal", "error", "timing", "done")
"""Every event name a stream may carry, in the order they can appear."""

_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HistoryMessage(_Strict):
    """One earlier message of the conversation a question follows, in OpenAI's chat shape."""

    role: Literal["user", "assistant"]
    """`user`: a question asked before; `assistant`: the answer it was given."""
    content: str = Field(min_length=1, max_length=MAX_HISTORY_MESSAGE_CHARS)
    """The message's text."""

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the message is empty; leave out a turn that has no text")
        return value


class AskRequest(_Strict):
    """The body of ``POST /v1/ask``."""

    question: str = Field(min_length=1, max_length=100_000)
    """The user's question; surrounding white space is dropped, and it may not be empty."""
    scope: list[str] | None = Field(default=None, max_length=MAX_SCOPE_ENTRIES)
    """Page-id prefixes to answer from (such as `guide` or `metrics/latency`); null or `/` means every page."""
    language: str | None = Field(default=None, max_length=35)
    """BCP-47 tag of the language the reader wants; the prompt already asks for the question's language."""
    stream: bool = True
    """True: answer with server-sent events; false: answer with one JSON object."""
    history: list[HistoryMessage] = Field(default_factory=list, max_length=MAX_HISTORY_MESSAGES)
    """For a follow-up: the conversation's earlier messages, first first, each `{role, content}` with role
    `user` or `assistant`; empty for a single question. The search reads the question with them, and the
    prompt carries the latest of them before the question."""

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty; send the text to answer")
        return value.strip()

    @field_validator("scope")
    @classmethod
    def _scope_entries(cls, value: list[str] | None) -> list[str] | None:
        # Read by the retriever's rule (metrics.gold.in_scope): `/` is the whole docs tree.
        if value is None:
            return None
        for entry in value:
            if not entry.strip() or len(entry) > 200 or "#" in entry:
                raise ValueError(f"scope entry {entry[:60]!r} is not a page-id prefix such as 'guide/auth' or '/'")
        return [entry.strip() for entry in value]

    @field_validator("language")
    @classmethod
    def _bcp47(cls, value: str | None) -> str | None:
        if value is not None and not _LANGUAGE.match(value):
            raise ValueError(f"language {value[:40]!r} is not a BCP-47 tag such as 'en' or 'pt-BR'")
        return value


class RankedHit(_Strict):
    """One ranked section."""

    section_id: str
    """The section (`page#anchor`)."""
    chunk_id: str
    """The chunk of the section that earned its rank."""
    score: float
    """Its BM25 score."""


class PrimedSource(_Strict):
    """One numbered source the model was shown."""

    n: int
    """Its marker number, from 1."""
    section_id: str
    """The section it came from."""
    title: str
    """Page title and heading path."""
    url: str
    """The section's public link."""


class RetrievalEvent(_Strict):
    """What retrieval found and what the model is shown."""

    hits: list[RankedHit] = Field(default_factory=list)
    """Ranked sections, best first (at most `retrieval.top_k`)."""
    primed: list[PrimedSource] = Field(default_factory=list)
    """The numbered sources (at most `prime.top_k`)."""
    query: str | None = None
    """What the docs were searched with, when it was not the question as asked (a follow-up, read with the
    turns before it); null when the question was searched as asked."""


class TextEvent(_Strict):
    """A piece of streamed text (`thought` or `token`)."""

    text: str
    """The piece, to be appended to what came before."""


class RefusalEvent(_Strict):
    """The turn ended in a refusal."""

    refused_by: Literal["gate", "model"]
    """`gate`: the retrieval gate refused before the model ran; `model`: the model refused."""
    cause: Cause
    """Why: `not-answerable`, `out-of-scope` or `unsafe`."""
    message: str = REFUSAL_MESSAGE
    """What to show the reader."""
    reply: str | None = None
    """The model's reply as written (starting `REFUSE:`), for audits; null for the gate."""


class ErrorEvent(_Strict):
    """The turn failed; the message is safe to show and the details are in the server's log."""

    code: str
    """`model_error`, `model_timeout`, `model_unfinished` (the model service ended the turn without
    finishing it), `model_empty`, `reply_too_long` (the model's reply ran past `max_tokens` and was
    cut), `shutdown` (the server stopped before the answer was done) or `internal`, and for refused
    requests the HTTP reason."""
    message: str
    """What went wrong, without internals."""
    request_id: str | None = None
    """Quote it to find the server's log lines for this request."""


class TimingEvent(_Strict):
    """Where the server's time went, in milliseconds of a monotonic clock."""

    embed_ms: float
    """Turning the question into what the index is searched with: its query terms, and for
    dense or hybrid retrieval its embedding (BM25 needs no model: a fraction of a millisecond)."""
    retrieve_ms: float
    """The rest of the search: scoring and ranking. `embed_ms + retrieve_ms` is the local runtime's retrieve."""
    model_ms: float
    """The model, from the request to its last piece; 0 when the gate refused."""
    total_ms: float
    """From the request's arrival to this event."""


class DoneEvent(_Strict):
    """The end of the turn."""

    request_id: str
    """The request's id, also sent as the `X-Request-Id` header."""
    finish_reason: str | None = None
    """Why the model service said the turn ended (`stop`, `length`); null when it said nothing."""
    truncated: bool = False
    """The answer stopped at the model's `max_tokens`."""
    usage: dict[str, int] = Field(default_factory=dict)
    """Token usage the model service reported."""


class AskResult(_Strict):
    """The answer to `POST /v1/ask` with `stream: false`: the facts of every event at once."""

    request_id: str
    """The request's id."""
    retrieval: RetrievalEvent | None = None
    """What retrieval found; null only when the turn failed before it."""
    answer: str = ""
    """The answer text with its `[n]` markers (empty when refused)."""
    reasoning: str | None = None
    """The model's reasoning, for models that think aloud."""
    citations: Panel | None = None
    """The rendered panel, when answered."""
    refusal: RefusalEvent | None = None
    """The refusal, when refused."""
    error: ErrorEvent | None = None
    """The failure, when failed."""
    timing: TimingEvent | None = None
    """Where the server's time went."""


class ErrorBody(_Strict):
    """The body of every non-2xx JSON response."""

    error: ErrorEvent
    """What went wrong."""


class ModelInfo(_Strict):
    """The model a server answers with."""

    provider: str
    """`extractive` or `openai`."""
    name: str
    """The model's name."""


class WorkerHealth(_Strict):
    """One worker process of the server, as `/healthz` reports it."""

    index: int
    """The worker's number, from 0."""
    pid: int
    """Its process id; 0 while it is being forked."""
    state: Literal["up", "starting", "down"]
    """`up` while it serves; `starting` from its fork until its app has started; `down` from its end to its restart."""
    in_flight: int
    """Questions it is answering (0 unless it is up)."""
    waiting: int
    """Questions waiting in its line for a slot (0 unless it is up)."""
    capacity: int
    """Questions it answers at once: its share of `--max-concurrency` while it is up, else 0."""
    turned_away: int
    """Questions it refused with 503 since it last started, its line being full."""
    restarts: int
    """Times the server started it again after it ended."""
    last_exit: str | None = None
    """How it last ended, such as `killed by SIGKILL` or `exited with status 1`; null when it never ended."""


class HealthTotals(_Strict):
    """The server's figures summed over its workers."""

    workers: int
    """Worker processes the server runs when all are up."""
    workers_up: int
    """Those that serve right now."""
    in_flight: int
    """Questions being answered, over every worker."""
    waiting: int
    """Questions waiting for a slot, over every worker."""
    capacity: int
    """Questions the workers that are up answer at once: `max_concurrency` less the shares of workers that are down."""
    turned_away: int
    """Questions refused with 503, over every worker since each last started."""
    restarts: int
    """Times a worker was started again after it ended."""


class Health(_Strict):
    """The answer to `GET /healthz`."""

    status: Literal["ok", "degraded", "draining"] = "ok"
    """`ok` when every worker serves; `degraded` while one is down or starting, and `total.capacity` is less;
    `draining` once the server was told to stop (answered with 503)."""
    draining: bool = False
    """The server was told to stop: it takes no new question and finishes the answers under way."""
    version: str = __version__
    """DocPilot's version."""
    corpus: str
    """Fingerprint of the docs being served (sha256 of every page)."""
    pages: int
    """How many pages are served."""
    model: ModelInfo
    """The model that answers."""
    auth: Literal["bearer", "off"]
    """Whether `/v1/ask` needs a bearer token."""
    in_flight: int
    """Questions being answered right now by the worker process that answered this request."""
    max_concurrency: int
    """Questions answered at once over every worker before new ones wait in line."""
    waiting: int = 0
    """Questions of this worker process waiting in line for a slot."""
    turned_away: int = 0
    """Questions this worker process refused with 503 since it started, the line being full."""
    worker: int = 0
    """The number of the worker process that answered this request (see `workers`)."""
    total: HealthTotals | None = None
    """The figures over every worker: in flight, waiting, capacity left, restarts."""
    workers: list[WorkerHealth] = Field(default_factory=list)
    """Each worker process's figures."""


EVENT_MODELS: dict[str, type[BaseModel]] = {
    "retrieval": RetrievalEvent,
    "thought": TextEvent,
    "token": TextEvent,
    "citations": Panel,
    "refusal": RefusalEvent,
    "error": ErrorEvent,
    "timing": TimingEvent,
    "done": DoneEvent,
}
"""The payload model of each event name."""


def _header(text: str) -> dict[str, Any]:
    return {"schema": {"type": "string"}, "description": text}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def openapi_document(*, max_body_bytes: int, max_question_chars: int, max_concurrency: int) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the server, with its limits written into it."""
    shown = [AskRequest, AskResult, ErrorBody, Health, *dict.fromkeys(EVENT_MODELS.values())]
    _, schemas = models_json_schema(
        [(m, "validation" if m is AskRequest else "serialization") for m in shown],
        ref_template="#/components/schemas/{model}", schema_generator=DocumentedSchema,
    )

    def ref(model: type[BaseModel]) -> dict[str, str]:
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    def problem(text: str, **headers: str) -> dict[str, Any]:
        response: dict[str, Any] = {"description": text, "content": _json(ref(ErrorBody))}
        if headers:
            response["headers"] = {name: _header(text) for name, text in headers.items()}
        return response

    events = "\n".join(f"- `{name}`: {EVENT_MODELS[name].__doc__.splitlines()[0]}" for name in EVENT_NAMES)
    ask = {
        "post": {
            "summary": "Answer one question from the docs",
            "description": (
                "Retrieves, primes, asks the model and renders the answer. A follow-up sends the conversation's "
                "earlier messages as `history`: the search reads the question with them (the `retrieval` event's "
                "`query` says what was searched) and the prompt carries the latest of them. "
                "With `stream: true` (the default) "
                "the reply is `text/event-stream`; each event's data is one JSON object:\n" + events
                + "\n\nWith `stream: false` the reply is one `AskResult` and a `Server-Timing` header."
            ),
            "security": [{"bearer": []}],
            "requestBody": {"required": True, "content": _json(ref(AskRequest))},
            "responses": {
                "200": {
                    "description": "The answer, as events or as one object.",
                    "headers": {
                        "Server-Timing": _header("embed, retrieve, model and total durations (JSON replies)"),
                        "X-Request-Id": _header("The request's id"),
                    },
                    "content": {
                        "text/event-stream": {"schema": {"type": "string", "description": "Events; see above."}},
                        "application/json": {"schema": ref(AskResult)},
                    },
                },
                "401": problem("No bearer token, or a wrong one.", **{"WWW-Authenticate": "Bearer challenge"}),
                "403": problem("On a loopback server: a Host that is not local, or a foreign Origin."),
                "408": problem("The request line and headers, or the whole request with its body, did not arrive in time."),
                "415": problem("The body is not sent as `Content-Type: application/json`."),
                "431": problem("The request line and headers are too large."),
                "413": problem(f"The body is larger than {max_body_bytes} bytes."),
                "422": problem(
                    f"Not a valid request: the question is over {max_question_chars} characters, or `history` holds "
                    f"more than {MAX_HISTORY_MESSAGES} messages, a role other than `user` or `assistant`, or a "
                    f"message over {MAX_HISTORY_MESSAGE_CHARS} characters."
                ),
                "500": problem("An unexpected failure; the details are in the server's log under the request id."),
                "502": problem("The model failed (JSON replies only; a stream reports it as an `error` event)."),
                "503": problem(
                    f"{max_concurrency} questions are in flight and the queue is full; retry.",
                    **{"Retry-After": "Seconds"},
                ),
            },
        }
    }
    health = {
        "get": {
            "summary": "Liveness, the docs and the model being served",
            "security": [],
            "responses": {"200": {"description": "The server is up.", "content": _json(ref(Health))}},
        }
    }
    spec = {
        "get": {
            "summary": "This document",
            "security": [],
            "responses": {"200": {"description": "The OpenAPI document.", "content": _json({"type": "object"})}},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "DocPilot",
            "version": __version__,
            "description": "Answers questions from a folder of docs, streaming the answer and each stage's time.",
        },
        "paths": {"/v1/ask": ask, "/healthz": health, "/openapi.json": spec},
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": f"The value of {TOKEN_VARIABLE}."}
            },
        },
        "security": [{"bearer": []}],
    }
