"""Server-sent events read from a body that arrives in pieces: the reader the openai model and DocPilot's API client share."""

from __future__ import annotations

import codecs
import re

# Server-sent events end lines with any of these; str.splitlines would also cut at
# characters such as U+2028 that JSON may carry unescaped inside a chunk.
_LINE_END = re.compile(r"\r\n|\r|\n")


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

    def __init__(self, *, max_line: int | None = None, dataless: bool = False) -> None:
        # ``dataless``: a named event with no data line is dispatched with empty data, as
        # servers mark a stream's end (LangServe's `event: end`); SSE itself drops such events.
        self._dataless = dataless
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
                if self._data or (self._dataless and self._name != "message"):
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
