"""The wire format of streamed replies: server-sent events, the JSON chunks an
OpenAI-compatible service sends in them and how their deltas make up a turn, and the
``Retry-After`` header of a service asking for patience.

The event reader and the ``Retry-After`` parser serve both the openai model and the
client that measures a DocPilot server over HTTP, so the two read the wire alike.

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

import codecs
import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from docpilot.config.redact import redact
from docpilot.models.base import Fault, Reply, Turn, paints, read_reply, unfinished_reply

# Server-sent events end lines with any of these; str.splitlines would also cut at
# characters such as U+2028 that JSON may carry unescaped inside a chunk.
_LINE_END = re.compile(r"\r\n|\r|\n")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
_EXCERPT = 200
RETRY_AFTER_CAP_S = 30.0
"""The longest wait a ``Retry-After`` header is obeyed for; a longer one is cut to this."""
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


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait as a ``Retry-After`` header asks, in seconds or as an HTTP date.

    None when the header is absent or unreadable; a date in the past gives 0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable


def retry_wait_s(value: str | None, *, default: float, now: datetime | None = None) -> float:
    """How long to wait before asking again: the ``Retry-After`` header's wait, at most
    ``RETRY_AFTER_CAP_S``, else ``default`` when the header is absent or unreadable."""
    seconds = parse_retry_after(value, now=now)
    return default if seconds is None else min(seconds, RETRY_AFTER_CAP_S)


class LineTooLong(ValueError):
    """A stream sent a line, or an event's data, longer than its reader takes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a line or event of more than {limit} characters")
        self.limit = limit


class EventReader:
    """Reads the data of server-sent events from a body that arrives in pieces of any size.

    A piece may end inside a UTF-8 character, inside a line, or between the ``\\r`` and
    ``\\n`` of a line end; lines may end in ``\\n``, ``\\r\\n`` or ``\\r``. With
    ``max_line``, a line or an event's data longer than that raises ``LineTooLong`` as soon
    as the reader holds that much of it (the reader is then spent); without, lines have no
    length limit. Comments and fields other than ``event`` and ``data`` are skipped.

        reader = EventReader()
        for piece in body:
            for data in reader.feed(piece):  # or feed_named: (event name, data) pairs
                ...
        leftover = reader.close()
    """

    def __init__(self, *, max_line: int | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max_line = max_line
        self._line: list[str] = []  # the start of a line whose end has not arrived
        self._held = 0  # characters in self._line
        self._after_cr = False  # the last piece ended in "\r", so a "\n" opening the next ends no line
        self._data: list[str] = []  # data lines of an event whose blank line has not arrived
        self._data_chars = 0  # characters in self._data
        self._name = "message"  # the event's name, from its `event:` line; SSE's default otherwise

    def feed(self, piece: bytes) -> list[str]:
        """The data of every event this piece of the body completed, in order."""
        return [data for _, data in self._events(self._lines(self._decoder.decode(piece)))]

    def feed_named(self, piece: bytes) -> list[tuple[str, str]]:
        """The name and data of every event this piece of the body completed, in order."""
        return self._events(self._lines(self._decoder.decode(piece)))

    def close(self) -> list[str]:
        """At the end of the body: ``["[DONE]"]`` when it ended inside a ``[DONE]`` event, else nothing.

        Any other event cut off by the end of the body is dropped, as SSE says; the end
        mark is kept because some servers omit the blank line after it.
        """
        lines = self._lines(self._decoder.decode(b"", True))
        if self._line:
            lines.append("".join(self._line))
            self._line = []
        self._events(lines)
        data, self._data, self._data_chars = self._data, [], 0
        self._name = "message"
        return ["[DONE]"] if data == ["[DONE]"] else []

    def _lines(self, text: str) -> list[str]:
        if not text:
            return []
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            lines = _LINE_END.split(text)
            self._after_cr = text[-1] == "\r"
        elif "\n" in text:
            lines = text.split("\n")
        else:
            # Part of a long line: pieces are joined once, when the line ends.
            self._line.append(text)
            self._held += len(text)
            self._check(self._held)
            return []
        if self._line:
            self._check(self._held + len(lines[0]))
            self._line.append(lines[0])
            lines[0] = "".join(self._line)
        unfinished = lines.pop()
        self._line = [unfinished] if unfinished else []
        self._held = len(unfinished)
        if self._max_line is not None:
            for line in lines:
                self._check(len(line))
            self._check(self._held)
        return lines

    def _check(self, length: int) -> None:
        if self._max_line is not None and length > self._max_line:
            self._line, self._data, self._held, self._data_chars = [], [], 0, 0
            raise LineTooLong(self._max_line)

    def _events(self, lines: list[str]) -> list[tuple[str, str]]:
        events: list[tuple[str, str]] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append((self._name, "\n".join(self._data)))
                    self._data, self._data_chars = [], 0
                self._name = "message"
            elif line[0] != ":":
                field, _, value = line.partition(":")
                value = value[1:] if value[:1] == " " else value
                if field == "data":
                    self._data.append(value)
                    self._data_chars += len(value) + 1
                    self._check(self._data_chars)  # many data lines make one event's data
                elif field == "event":
                    self._name = value or "message"
        return events


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

