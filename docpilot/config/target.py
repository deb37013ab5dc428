"""Targets: an assistant DocPilot did not build, reached over HTTP, its request and reply mapped in config.

A target is named under ``targets:`` and chosen with ``target:`` (``--target NAME``, or a
variant's ``target`` key). Its request is a JSON body template; its reply is read with
JMESPath expressions (``docpilot.targets.ask`` asks it), so nested shapes need no code.
Header values may name environment variables (``${MY_TOKEN}``): they are read when a
question is sent, so a secret never sits in the config a report stores.

A follow-up (a turn of a golden conversation after the first) reaches a target in one of
its conversation modes (``Target.conversation``): its body carries the earlier turns
(``{history}``) or the whole chat (``{messages}``), or the target keeps the thread itself
and is sent back the thread id its last reply named (``reply.thread``, ``{thread}``); a
target in none of them is asked every follow-up as a question on its own.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ReplyMapping(_Strict):
    """How the target's reply is read: its shape and a JMESPath expression per field."""

    kind: Literal["json", "sse", "ndjson"] = "json"
    """`json`: one JSON document; `sse`: a server-sent event stream; `ndjson`: one JSON document a line."""
    answer: str | None = None
    """`json`: the answer text (such as `answer` or `output.answer`). Streams: the text delta of one
    event or line (such as `delta`, `choices[0].delta.content`, or `@` for a bare JSON string)."""
    sources: str | None = None
    """The list of sources the answer drew on, in their order (such as `sources` or `context[*].metadata`);
    unset, the target shows none and its retrieval metrics are absent. In a stream, the first event or
    line (of `sources_event`) where it matches gives them."""
    citations: str | None = None
    """The list of what the answer cites (such as `citations` or `citations[*].url`), when the target gives
    it apart from the text; each item is a 1-based number into the returned sources or a source, read with
    `source_id` and mapped as the sources are. Set, it replaces the answer's `[n]` markers; unset, the
    markers are read. In a stream, the first event (of `citations_event`) or line where it matches gives them."""
    source_id: str = "@"
    """Within one source, where its URL, path or id is (such as `url`, `metadata.source`); `@` is the
    source itself, for a list of strings."""
    refusal: str | None = None
    """Where the reply says it refused (truthy means refused); unset, a reply refuses by DocPilot's own
    rule, an answer that starts with `REFUSE: <cause>`."""
    delta_event: str = "message"
    """`sse`: the name of the events that carry text deltas (`message` is SSE's default name)."""
    sources_event: str | None = None
    """`sse`: the name of the event that carries the sources; unset, `delta_event`."""
    citations_event: str | None = None
    """`sse`: the name of the event that carries the citations; unset, the sources' event."""
    end_event: str | None = None
    """`sse`: the name of the event that ends the turn; a stream that stops before it is an error row.
    Unset, the end of the stream ends the turn."""
    end: str | None = None
    """`ndjson`: where a line says the turn ended (truthy, such as `done`); a stream that stops
    before it is an error row. Unset, the last line ends the turn."""
    thread: str | None = None
    """For an assistant that keeps the conversation itself: where a reply names its thread (such as
    `thread_id`), a string or a number, sent back as `{thread}` with the conversation's next turn. In a
    stream, the first event (of `thread_event`) or line where it matches names it."""
    thread_event: str | None = None
    """`sse`: the name of the event that names the thread; unset, the events read for the answer, the
    sources and the citations."""


class SourceMapping(_Strict):
    """How a returned source (a URL, a path, an id) becomes a DocPilot page or section id."""

    base_url: str | None = None
    """A prefix stripped from each source, such as `https://docs.example.com/`; unset, the part of
    a URL after its host is kept."""
    prefix: str = ""
    """A path prefix stripped after the base URL, such as `docs/` or `/page/`."""
    suffixes: list[str] = Field(default_factory=lambda: [".html", ".htm", ".md", ".mdx", "/"])
    """Endings dropped from the page part (`guide/auth.html` → `guide/auth`)."""
    index: str = "index"
    """The page name that names its folder (`guide/index` → `guide`)."""
    heading: str | None = None
    """Within one source, the JMESPath of the heading its text sits under, such as
    `metadata."Header 3" || metadata."Header 2"` (a string), or a heading path as a list,
    outermost first; the heading is found on the source's page by its text. Unset, the
    `#anchor` names the section, and a source without one names the page."""

    @field_validator("heading")
    @classmethod
    def _heading_is_jmespath(cls, heading: str | None) -> str | None:
        _compiles("source_ids.heading", heading)
        return heading


class SearchMapping(_Strict):
    """A target's search endpoint: its ranking without an answer, for `--gate-only`."""

    url: str = Field(pattern=r"^(https?://|\$\{)\S+$")
    """The endpoint a question is sent to for a ranking, such as `http://127.0.0.1:9000/search`; `${NAME}` is
    read from the environment as in the target's `url`. The target's headers go with it."""
    method: Literal["POST", "GET", "PUT"] = "POST"
    """The HTTP method."""
    body: Any = Field(default_factory=lambda: {"query": "{question}"})
    """The JSON body template, with the target's placeholders."""
    sources: str
    """The JMESPath of the ranked list in the JSON reply, best first (such as `hits` or `results[*].url`)."""
    source_id: str = "@"
    """Within one item, where its URL, path or id is; the target's `source_ids` map it."""

    @field_validator("sources", "source_id")
    @classmethod
    def _is_jmespath(cls, expression: str) -> str:
        _compiles("search path", expression)
        return expression


class Target(_Strict):
    """An assistant reached over HTTP: where to send a question and how to read what comes back."""

    url: str = Field(pattern=r"^(https?://|\$\{)\S+$")
    """The endpoint a question is sent to, such as `http://127.0.0.1:9000/ask`; `${NAME}` in it is the
    environment variable NAME, read as the run starts and redacted wherever it would show."""
    method: Literal["POST", "GET", "PUT"] = "POST"
    """The HTTP method."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Headers sent with each question; `${NAME}` in a value is the environment variable NAME, read
    when the question is sent (a missing one stops the run before any question)."""
    body: Any = Field(default_factory=lambda: {"question": "{question}"})
    """The JSON body template: a string that is exactly `{question}`, `{scope}`, `{id}`, `{history}`,
    `{messages}` or `{thread}` becomes the record's question, scope (a list, or null), id, earlier turns
    (a list of `{role, content}` messages), whole chat (the earlier turns and the question as the last
    `user` message) or thread id (null on a conversation's first turn) as a JSON value; inside a longer
    string they are spliced in as text (a list as its JSON, a missing thread as nothing)."""
    thread_url: str | None = Field(default=None, pattern=r"^(https?://|\$\{)\S+$")
    """The endpoint a turn asked in a thread is sent to, when it is not `url` (such as
    `https://api.example.com/threads/{thread}/chat`); `{thread}` in it is the thread id. Unset, `url`."""
    thread_body: Any = None
    """The JSON body template of a turn asked in a thread, when it is not `body`; the same placeholders.
    Unset, `body`."""
    message_shape: Literal["openai", "langchain"] = "openai"
    """How `{history}` and `{messages}` write one message: `openai`, `{"role": "user" | "assistant",
    "content": ...}`; `langchain`, LangChain's own `{"type": "human" | "ai", "content": ...}`, which a
    LangServe chain's chat history and chat playground input take."""
    reply: ReplyMapping
    """How the reply is read (`answer` at least)."""
    search: SearchMapping | None = None
    """A search endpoint that returns the target's ranking alone: `eval --gate-only` measures retrieval
    through it, with no answer asked for. Unset, a target cannot run `--gate-only`."""
    source_ids: SourceMapping = Field(default_factory=SourceMapping)
    """How returned sources map to DocPilot's section ids."""
    timeout_s: float = Field(default=60.0, gt=0, le=86_400)
    """Longest one turn may take, in seconds, from sending the question to the reply's end (a stream's
    end event): a reply still coming then is an error row (`timeout`), and the run goes on."""
    max_reply_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    """The most bytes one reply may send (32 MiB unless set); past it the reply is no longer read and the
    record is an error row (`reply_too_large`), so a run's memory stays bounded whatever a target sends."""
    max_sources: int = Field(default=1000, ge=1)
    """The most sources one reply may return (1,000 unless set); more make the record an error row
    (`reply_too_large`)."""
    retries: int = Field(default=3, ge=0, le=10)
    """Times a 429 or 503 reply is asked again, after its `Retry-After` (at most 30 s) or else a backoff
    that doubles from 0.5 s; past the last, the record is an error row naming the status."""

    @field_validator("reply")
    @classmethod
    def _answer_named(cls, reply: ReplyMapping) -> ReplyMapping:
        if reply.answer is None:
            raise ValueError("reply.answer is required: the JMESPath of the answer text (or of a stream's delta)")
        if reply.citations is not None and reply.sources is None:
            raise ValueError("reply.citations needs reply.sources: a citation is read against the returned "
                             "sources (a target that returns only what it cites names the same path for both)")
        for name in ("answer", "sources", "citations", "source_id", "refusal", "end", "thread"):
            _compiles(f"reply.{name}", getattr(reply, name))
        return reply

    @model_validator(mode="after")
    def _thread_sent_back(self) -> Target:
        sends = [name for name, value in (("url", self.url), ("headers", self.headers), ("body", self.body),
                                          ("thread_url", self.thread_url), ("thread_body", self.thread_body))
                 if "{thread}" in json.dumps(value)]
        if self.reply.thread is None and (sends or self.thread_url is not None or self.thread_body is not None):
            where = ", ".join(sends) or ", ".join(n for n in ("thread_url", "thread_body") if getattr(self, n))
            raise ValueError(f"{where} sends a thread, but reply.thread does not say where a reply names it; set "
                             "reply.thread to the JMESPath of the thread id (such as thread_id)")
        if self.reply.thread is not None and not sends:
            raise ValueError("reply.thread reads a thread id that no request sends back; put {thread} in the url, "
                             "a header, the body, thread_url or thread_body")
        return self

    @property
    def conversation(self) -> Literal["thread", "messages", "history", "none"]:
        """How a follow-up reaches this target: `thread` (the thread id its last reply named), `messages`
        (the whole chat in the body), `history` (the earlier turns in the body) or `none` (alone)."""
        if self.reply.thread is not None:
            return "thread"
        body = json.dumps([self.body, self.thread_body])
        if "{messages}" in body:
            return "messages"
        return "history" if "{history}" in body else "none"


def _compiles(name: str, expression: str | None) -> None:
    """Raise ValueError naming the field when ``expression`` is set and is not JMESPath."""
    if expression is None:
        return
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        jmespath.compile(expression)
    except JMESPathError as exc:
        raise ValueError(f"{name}: {expression!r} is not a JMESPath expression ({exc})") from None
