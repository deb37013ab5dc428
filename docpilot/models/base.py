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
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from docpilot.schema import Cause

CAUSES: tuple[str, ...] = ("not-answerable", "out-of-scope", "unsafe")
_REFUSAL = re.compile(r"^\s*(?:```[a-z]*\s*)?[*_]{0,2}REFUSE[*_]{0,2}:[*_]{0,2}\s*([a-z-]+)", re.IGNORECASE)


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


class Turn(BaseModel):
    """What a model produced for one prompt, with its timings."""

    model_config = ConfigDict(extra="forbid")

    answer: str = ""
    """The answer text, markers included."""
    reasoning: str | None = None
    """Thinking the model streamed apart from the answer."""
    refused: bool = False
    """Whether the model refused."""
    refusal_cause: Cause | None = None
    """The cause the refusal named."""
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
    truncated: bool = False
    """The answer stopped at ``max_tokens`` (``finish_reason: length``): kept, but marked."""
    error: str | None = None
    """Why the turn failed; None on success."""


class Model(Protocol):
    """An answering model. Implementations are async so calls can run concurrently."""

    async def complete(self, prompt: Prompt) -> Turn:
        """Answer one prompt; never raises for a service fault, reports it in ``Turn.error``."""
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
