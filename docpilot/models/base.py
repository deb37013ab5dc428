"""What every model takes and gives back.

A model receives a ``Prompt`` (the question, the numbered sources and the chat
messages built from them) and returns a ``Turn``. Times are measured with a monotonic
clock from the moment the request is sent.

Refusal protocol: a reply whose text starts with ``REFUSE:`` followed by a cause
(``not-answerable``, ``out-of-scope``, ``unsafe``) is a refusal; ``parse_refusal``
reads it. The primer tells the model to answer this way when the sources do not
answer the question. Small models write it loosely (``Refuse: not-answerable``
followed by a stray code fence, or the line inside a fence or in bold), so case,
an opening fence and emphasis marks are forgiven.

First token: ``paints`` is the one rule, used by every runtime, for whether a piece of
answer text is the first a reader would see: white space alone paints nothing.

A ``Reply`` is what the service sent, as received; ``read_reply`` is the one place that
says what it means (an answer, a refusal, a truncated answer or an error). Every model
builds its turns through it, and the model stage's cache stores the reply and reads it
through it again, so a change of these rules reaches cached turns too.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

from docpilot.schema import Cause, ErrorCode

CAUSES: tuple[str, ...] = ("not-answerable", "out-of-scope", "unsafe")
_REFUSAL = re.compile(r"^\s*(?:```[a-z]*\s*)?[*_]{0,2}REFUSE[*_]{0,2}:[*_]{0,2}\s*([a-z-]+)", re.IGNORECASE)
INTERRUPTED_HINT = (
    "the server ended the turn without finishing it, as llama.cpp's server does to a turn in "
    "flight when the next request arrives; run that server with --interrupt_requests False, "
    "or lower the concurrency (--concurrency 1)"
)


class Source(BaseModel):
    """One numbered source shown to the model."""

    model_config = ConfigDict(extra="forbid")

    n: int
    """Its marker number, from 1."""
    section_id: str
    """The section it came from."""
    title: str
    """Page title and heading path, for the reader."""
    text: str
    """The text the model reads."""


class Prompt(BaseModel):
    """Everything a model needs for one turn."""

    model_config = ConfigDict(extra="forbid")

    question: str
    """The user's question."""
    sources: list[Source] = Field(default_factory=list)
    """Numbered sources, [1] first."""
    messages: list[dict[str, str]] = Field(default_factory=list)
    """Chat messages (system, user) built by the primer."""


class Reply(BaseModel):
    """What the service sent for one turn, as received, before any rule says what it means."""

    model_config = ConfigDict(extra="forbid")

    answer: str = ""
    """The answer text, markers included."""
    reasoning: str | None = None
    """Thinking the model streamed apart from the answer."""
    latency_ms: float | None = None
    """Send to end of turn."""
    first_token_ms: float | None = None
    """Send to the first answer text that is more than white space (see ``paints``)."""
    first_thought_ms: float | None = None
    """Send to first reasoning text."""
    usage: dict[str, int] = Field(default_factory=dict)
    """Token counts the service reported."""
    finish_reason: str | None = None
    """Why the service said the turn ended (``stop``, ``length``, ...); None when it never said."""


REPLY_FIELDS = frozenset(Reply.model_fields)
"""The fields of a turn that are its reply as received: what the model-stage cache stores."""


class Turn(Reply):
    """What a model produced for one prompt, with its timings, and what the reply means."""

    refused: bool = False
    """Whether the model refused."""
    refusal_cause: Cause | None = None
    """The cause the refusal named."""
    truncated: bool | None = False
    """The answer stopped at ``max_tokens`` (``finish_reason: length``): kept, but marked; None when the
    assistant cannot say (a target, which gives no finish reason)."""
    error: str | None = None
    """Why the turn failed; None on success."""
    error_code: ErrorCode | None = None
    """The kind of fault in ``error`` (see ``docpilot.schema.ErrorCode``); None on success."""
    cited: list[str] | None = None
    """What the answer cites when the assistant said it apart from the text (a target's `reply.citations`),
    each a source's number or a section id; None when the answer's markers say."""

    def reply(self) -> Reply:
        """The reply as received, without what was read into it."""
        return Reply(**self.model_dump(include=REPLY_FIELDS))


class Fault(NamedTuple):
    """Why a turn failed: the code it is classified by, and a message that says what to do."""

    code: ErrorCode
    """The kind of fault (``docpilot.schema.ErrorCode``)."""
    message: str
    """What went wrong and the fix, for the row's ``error``."""


class Model(Protocol):
    """An answering model. Implementations are async so calls can run concurrently."""

    async def complete(self, prompt: Prompt) -> Turn:
        """Answer one prompt; never raises for a service fault, reports it in ``Turn.error`` and its code."""
        ...


def finish_piece(turn: Turn) -> str:
    """The text of a stream's last ``("finish", text)`` piece: how the turn ended and what it used, as JSON."""
    return json.dumps({"finish_reason": turn.finish_reason, "usage": turn.usage})


def read_finish(text: str) -> tuple[str | None, dict[str, int]]:
    """The finish_reason and usage a ``("finish", text)`` piece carries."""
    try:
        data = json.loads(text)
    except ValueError:
        return None, {}
    reason = data.get("finish_reason") if isinstance(data, dict) else None
    usage = data.get("usage") if isinstance(data, dict) else None
    usage = {k: v for k, v in usage.items() if isinstance(v, int)} if isinstance(usage, dict) else {}
    return (reason if isinstance(reason, str) else None), usage


def paints(text: str) -> bool:
    """Whether a piece of answer text shows the reader something: anything but white space.

    The time to the first such piece is a turn's first token, in every runtime.
    """
    return not text.isspace() and bool(text)


def parse_refusal(text: str) -> Cause | None:
    """The cause of a ``REFUSE: <cause>`` reply, or None when the text is an answer."""
    match = _REFUSAL.match(text or "")
    if not match:
        return None
    cause = match.group(1).lower()
    return cause if cause in CAUSES else "not-answerable"  # type: ignore[return-value]


def read_reply(reply: Reply, fault: Fault | None = None) -> Turn:
    """The turn a reply makes under today's rules: an answer, a refusal, a truncated answer or an error.

    ``fault`` is what ended the exchange before the reply came whole (the connection, a
    status, a timeout); it makes the turn an error whatever arrived. A reply that came
    whole is an answer only when the service said it finished (``finish_reason``) and it
    holds answer text or a refusal; ``finish_reason: length`` keeps the answer, marked
    truncated. Live turns and cached replies are read here alike.
    """
    raw = reply.model_dump(include=REPLY_FIELDS)
    if fault is not None:
        return Turn(**raw, error=fault.message, error_code=fault.code)
    cause = parse_refusal(reply.answer)
    fault = unfinished_reply(reply, refused=cause is not None)
    if fault is not None:
        return Turn(**raw, error=fault.message, error_code=fault.code)
    return Turn(**raw, refused=cause is not None, refusal_cause=cause, truncated=reply.finish_reason == "length")


def unfinished_reply(reply: Reply, *, refused: bool, chunks: int | None = None) -> Fault | None:
    """Why a reply that reached its end mark is still no answer; None when it is one.

    The service must have said the turn finished, and the turn must hold answer text
    (more than white space) or a refusal.
    """
    answer = reply.answer
    if reply.finish_reason is None:
        said = "with no answer text" if not paints(answer) else f"after {len(answer.split())} words"
        where = "" if chunks is None else f" in {chunks} chunks"
        return Fault("unfinished", (
            f"the service closed the stream with [DONE] but never said the turn finished "
            f"(no finish_reason{where}), {said}; fix: {INTERRUPTED_HINT}"
        ))
    if refused or paints(answer):
        return None
    if reply.finish_reason == "length":
        return Fault("empty", (
            "the service stopped at max_tokens before any answer text (finish_reason length); "
            "fix: raise model.max_tokens, since the reasoning used the whole budget"
        ))
    return Fault("empty", (
        f"the service finished the turn (finish_reason {reply.finish_reason}) with no answer text and no refusal; "
        "fix: check that the model answers this prompt (its chat template and the server's logs)"
    ))
