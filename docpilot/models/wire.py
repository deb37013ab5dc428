"""The wire format of streamed replies: the JSON chunks an OpenAI-compatible service
sends in its server-sent events (read by ``docpilot.net.sse``) and how their deltas
make up a turn.

A turn is an answer only when the service said it finished: a choice carried a
``finish_reason``. A stream closed by ``[DONE]`` without one was ended by the server
for its own reasons (llama.cpp's server, by default, ends a turn in flight when the
next request arrives), and is an error, as is a finished turn with no answer text
and no refusal. ``finish_reason: "length"`` keeps the answer and marks it truncated.
These rules live in ``docpilot.models.base.read_reply``, which cached replies are read by too.

A reply is capped while it streams, so memory stays bounded whatever a service sends:
past ``max_tokens`` as the service counts them (its usage chunks), or past
``reply_char_limit(max_tokens)`` characters of answer and reasoning together, the turn
ends with a ``reply_too_long`` fault. A piece too large to fit is never added, and the
event reader refuses a line longer than ``line_limit`` before it is whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from docpilot.models.base import Fault, Reply, Turn, paints, read_reply, unfinished_reply
from docpilot.redact import redact

_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
_EXCERPT = 200
CHARS_PER_TOKEN = 16
"""Characters of answer and reasoning a reply may hold per token of ``max_tokens``: a token
is about four characters of prose, so no reply a service cut at ``max_tokens`` comes near it."""
CHARS_FLOOR = 16_384
"""Characters every reply may hold on top of that, so that a small ``max_tokens`` still leaves room."""
_ESCAPE = 6  # JSON may write one character as six ("\u00e9"), and a line carries one chunk's JSON
_LINE_SLACK = 65_536  # a chunk's own fields (id, model, logprobs) beside its text


def reply_char_limit(max_tokens: int) -> int:
    """The most characters of answer and reasoning together a reply of ``max_tokens`` tokens may hold."""
    return max_tokens * CHARS_PER_TOKEN + CHARS_FLOOR


def line_limit(char_limit: int) -> int:
    """The longest line of a stream (one event's data) that can carry ``char_limit`` characters of text."""
    return char_limit * _ESCAPE + _LINE_SLACK


def reply_too_long(max_tokens: int, how: str) -> Fault:
    """The fault of a reply cut because it ran past ``max_tokens``; ``how`` says what showed it."""
    return Fault("reply_too_long", (
        f"the reply ran past max_tokens={max_tokens} ({how}); the stream was cut and its connection closed; "
        "fix: the service ignores max_tokens, so check its own limit (llama.cpp's --n-predict, "
        "a proxy that drops the parameter) and its stop tokens, or raise model.max_tokens if replies "
        "this long are wanted"
    ))


def excerpt(text: str) -> str:
    """A service's text on one line, secrets redacted and then cut to a length an error message can carry."""
    flat = redact(" ".join(text.split()))  # before the cut, so no cut keeps the start of a key
    return flat if len(flat) <= _EXCERPT else flat[:_EXCERPT] + "…"


def decode_chunks(data: str) -> list[Any]:
    """The JSON chunks in one event's data; raises ValueError when one is not JSON.

    orjson reads a chunk in a fraction of the standard library's time, and a turn has a
    chunk per few tokens.
    """
    try:
        return [orjson.loads(data)]
    except orjson.JSONDecodeError:  # a ValueError
        if "\n" not in data:
            raise
    # Some servers end each data line with a single newline, which joins several chunks
    # into one event; read them one by one.
    return [orjson.loads(line) for line in data.split("\n") if line.strip()]


class PartialTurn:
    """What one turn has received so far, kept across attempts and a timeout.

    With ``max_tokens``, the reply is capped as it arrives: a piece that would take the
    answer and reasoning past ``char_limit`` characters is not added, and usage past
    ``max_tokens`` completion tokens ends the turn too; either is a ``reply_too_long`` fault.
    """

    def __init__(self, listener: Callable[[str, str], None] | None = None, *, max_tokens: int | None = None) -> None:
        self.listener = listener  # told ("token" | "thought", text) of each piece as it arrives
        self.max_tokens = max_tokens
        self.char_limit = reply_char_limit(max_tokens) if max_tokens is not None else None
        """The most characters of answer and reasoning together the turn takes; None: no cap."""
        self.line_limit = line_limit(self.char_limit) if self.char_limit is not None else None
        """The longest line of its stream, or bytes of its JSON completion, it reads; None: no cap."""
        self.chars = 0  # characters of answer and reasoning taken so far
        self.started: float | None = None  # perf_counter() when the first attempt was sent
        self.ended_ms: float | None = None  # when the reply was complete, since started
        self.answer: list[str] = []
        self.reasoning: list[str] = []
        self.first_token_ms: float | None = None
        self.first_thought_ms: float | None = None
        self.usage: dict[str, int] = {}
        self.finish_reason: str | None = None  # why the service said the turn ended, when it said so
        self.chunks = 0  # once one has arrived, a failure can no longer be retried

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0 if self.started is not None else 0.0

    def take_event(self, data: str) -> Fault | None:
        """Add one event's chunks to the turn; the fault when they end it."""
        try:
            chunks = decode_chunks(data)
        except ValueError:
            return Fault("malformed", (
                f"malformed JSON in stream chunk {self.chunks + 1}: {excerpt(data)!r}; "
                "fix: the server sent a broken chunk; check its version and logs"
            ))
        now = self.elapsed_ms()
        # JSON objects decode to dicts; testing for dict is cheaper than the Mapping ABC.
        for chunk in chunks:
            self.chunks += 1
            if not isinstance(chunk, dict):
                return Fault("malformed", f"stream chunk {self.chunks} is not a JSON object: {excerpt(data)!r}")
            if chunk.get("error"):
                return Fault("service_error",
                             f"the service reported an error mid-stream: {excerpt(json.dumps(chunk['error']))}")
            for choice in chunk.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta")
                if isinstance(delta, dict) and (fault := self.take_message(delta, now)) is not None:
                    return fault
                self.take_finish(choice.get("finish_reason"))
            if (fault := self.take_usage(chunk.get("usage"))) is not None:
                return fault
        return None

    def take_finish(self, reason: Any) -> None:
        """Note the ``finish_reason`` of the turn's choice, once the service gives one."""
        if isinstance(reason, str) and reason:
            self.finish_reason = reason

    def take_message(self, piece: Mapping[str, Any], now_ms: float) -> Fault | None:
        """Add one streamed delta or one whole message to the turn; the fault when it would pass the cap."""
        content = piece.get("content")
        # Services name the field differently; one that sends both repeats the same text.
        thought = piece.get("reasoning_content") or piece.get("reasoning")
        if self.char_limit is not None:
            size = (len(content) if isinstance(content, str) else 0) + (len(thought) if isinstance(thought, str) else 0)
            if self.chars + size > self.char_limit:
                return self.too_long(f"more than {self.char_limit} characters of answer and reasoning")
            self.chars += size
        if isinstance(content, str) and content:
            self.answer.append(content)
            if self.first_token_ms is None and paints(content):
                self.first_token_ms = now_ms
            if self.listener is not None:
                self.listener("token", content)
        if isinstance(thought, str) and thought:
            self.reasoning.append(thought)
            if self.first_thought_ms is None:
                self.first_thought_ms = now_ms
            if self.listener is not None:
                self.listener("thought", thought)
        return None

    def take_usage(self, usage: Any) -> Fault | None:
        """Note the token counts a chunk reports; the fault when the service counts more than ``max_tokens``."""
        if not isinstance(usage, Mapping):
            return None
        self.usage = {k: int(usage[k]) for k in _USAGE_KEYS if isinstance(usage.get(k), int)}
        spent = self.usage.get("completion_tokens")
        if self.max_tokens is not None and spent is not None and spent > self.max_tokens:
            return self.too_long(f"the service counted {spent} completion tokens")
        return None

    def too_long(self, how: str) -> Fault:
        """The ``reply_too_long`` fault of this turn; ``how`` says what showed it."""
        return reply_too_long(self.max_tokens or 0, how)

    def to_turn(self, fault: Fault | None) -> Turn:
        """The turn as it ended; ``fault`` is what ended it, None when the reply came whole.

        What the reply means is read by ``read_reply``, the rule cached replies are read by too.
        """
        latency = self.ended_ms if self.ended_ms is not None else self.elapsed_ms()
        reply = Reply(
            answer="".join(self.answer),
            reasoning="".join(self.reasoning) or None,
            latency_ms=latency if self.started is not None else None,
            first_token_ms=self.first_token_ms,
            first_thought_ms=self.first_thought_ms,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )
        if fault is None and self.finish_reason is None:
            # Said here rather than by read_reply, which cannot know how many chunks came.
            fault = unfinished_reply(reply, refused=False, chunks=self.chunks)
        return read_reply(reply, fault)

