"""Reading a production log: one turn at a time from a JSONL or CSV file, by its ``LogMapping``.

``read_log`` streams the file, so a log of any length is read in bounded memory. Each
line (JSONL) or row (CSV, a mapping of column to cell) is read by the mapping's JMESPath
expressions into a ``LoggedTurn``; the question and the answer are redacted here, before
anything else sees them. A line that is not JSON, a row whose question is missing, or a
time that is no time raises ``InputError`` naming the file and the line (exit status 2).

Times: a number is read in the mapping's ``time_unit``; a list of two timestamps
``[start, end]`` (ISO 8601 text or epoch seconds) is their difference.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jmespath

from docpilot.config.logs import LogMapping
from docpilot.errors import InputError
from docpilot.redact import MARK, redact

__all__ = ["LoggedTurn", "Part", "Redactor", "log_format", "read_log", "split_log"]

_SPLIT = re.compile(r"[\s,;]+")
_REMEMBERED = 20_000
_MAX_FIELD = 10 * 1024 * 1024  # a CSV cell may hold a whole answer and its sources


@dataclass(slots=True)
class LoggedTurn:
    """One turn of the log as the mapping reads it, redacted, before the docs are asked."""

    line: int
    """The line (JSONL) or row (CSV, the header is line 1) it came from."""
    id: str
    """The turn's id: the mapping's `id`, else `line-<n>`."""
    question: str
    """The question, redacted."""
    answer: str | None
    """The answer text, redacted; None when the log has none."""
    sources: list[Any] = field(default_factory=list)
    """The sources shown, as the log gives them (URLs, paths, objects), in order."""
    citations: list[Any] | None = None
    """What the answer cites when the log lists it apart from the text; None to read the markers."""
    refused: bool | None = None
    """What the log says of a refusal; None when the mapping names none."""
    latency_ms: float | None = None
    """The turn's time, in milliseconds."""
    first_token_ms: float | None = None
    """The time to the first answer text, in milliseconds."""
    timestamp: str | None = None
    """When the turn happened, as the log wrote it."""
    conversation: str | None = None
    """The conversation it belongs to."""


class Redactor:
    """Takes the mapping's patterns, and key-shaped secrets, out of a text."""

    def __init__(self, patterns: list[str]) -> None:
        self._patterns = [re.compile(p) for p in patterns]
        self._done: dict[str, str] = {}  # logs repeat their texts: each is redacted once while remembered

    def __call__(self, text: str | None) -> str | None:
        if not text:
            return text
        done = self._done.get(text)
        if done is not None:
            return done
        clean = text
        for pattern in self._patterns:
            clean = pattern.sub(MARK, clean)
        clean = redact(clean, shapes=True)
        if len(self._done) >= _REMEMBERED:
            self._done.clear()
        self._done[text] = clean
        return clean


@dataclass(frozen=True, slots=True)
class Part:
    """A run of whole lines of a JSONL log: bytes ``start`` to ``end``, the first being line ``line``."""

    start: int
    end: int | None
    line: int


def log_format(path: Path, mapping: LogMapping) -> str:
    """`csv` or `jsonl`: the mapping's format, else the file's ending."""
    return mapping.format or ("csv" if path.suffix.lower() == ".csv" else "jsonl")


def split_log(path: Path, parts: int) -> list[Part]:
    """The JSONL log cut into at most ``parts`` runs of whole lines of about equal size, in order."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read the log ({exc.strerror})", path=path, hint="check the path") from None
    cuts, lines, done = [Part(0, None, 1)], 1, 0
    with path.open("rb") as handle:
        for k in range(1, parts):
            handle.seek(max(size * k // parts, done))
            handle.readline()  # to the start of the next whole line
            cut = handle.tell()
            if cut >= size or cut <= cuts[-1].start:
                break
            handle.seek(done)
            lines += handle.read(cut - done).count(b"\n")
            done = cut
            cuts.append(Part(cut, None, lines))
    return [Part(p.start, cuts[i + 1].start if i + 1 < len(cuts) else None, p.line) for i, p in enumerate(cuts)]


def read_log(path: Path, mapping: LogMapping, part: Part | None = None) -> Iterator[LoggedTurn]:
    """Each turn of the log at ``path`` (or of one ``part`` of a JSONL log), in file order.

    ``InputError`` names the line of a bad one.
    """
    reader = _Reader(path, mapping)
    items = _csv_rows(path) if log_format(path, mapping) == "csv" else _json_lines(path, part or Part(0, None, 1))
    for line, item in items:
        yield reader.turn(line, item)


def _json_lines(path: Path, part: Part) -> Iterator[tuple[int, Any]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read the log ({exc.strerror})", path=path, hint="check the path") from None
    with handle:
        handle.seek(part.start)
        at, n = part.start, part.line - 1
        for raw in handle:
            if part.end is not None and at >= part.end:
                break
            at += len(raw)
            n += 1
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                yield n, json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                problem = f"{exc.msg}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                raise InputError(f"not a JSON line ({problem})", path=path, line=n,
                                 hint="a JSONL log holds one JSON object a line; set format: csv for a CSV") from None


def _csv_rows(path: Path) -> Iterator[tuple[int, Any]]:
    csv.field_size_limit(_MAX_FIELD)
    with _opened(path) as handle:
        rows = csv.DictReader(handle)
        try:
            for row in rows:
                yield rows.line_num, {k: _cell(v) for k, v in row.items() if k is not None}
        except csv.Error as exc:
            raise InputError(f"not CSV ({exc})", path=path, line=rows.line_num,
                             hint="check the quoting of this row, or set format: jsonl") from None


def _cell(value: Any) -> Any:
    """A CSV cell: JSON lists and objects are read as such, other text stays text."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _opened(path: Path):
    try:
        return path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError(f"cannot read the log ({exc.strerror})", path=path,
                         hint="check the path") from None


class _Reader:
    """Reads one item of the log by the mapping, with the expressions compiled once."""

    def __init__(self, path: Path, mapping: LogMapping) -> None:
        self.path = path
        self.mapping = mapping
        self.redact = Redactor(mapping.redact)
        self._paths = {
            name: _compiled(expression)
            for name in ("question", "answer", "sources", "citations", "refusal", "latency", "ttft",
                         "timestamp", "conversation", "id")
            if (expression := getattr(mapping, name)) is not None
        }

    def _at(self, name: str, item: Any) -> Any:
        compiled = self._paths.get(name)
        return compiled.search(item) if compiled is not None else None

    def _fail(self, line: int, message: str, hint: str) -> InputError:
        return InputError(message, path=self.path, line=line, hint=hint)

    def turn(self, line: int, item: Any) -> LoggedTurn:
        if not isinstance(item, dict):
            raise self._fail(line, f"a turn is a JSON object, not {type(item).__name__}",
                             "write one object a line")
        question = self._at("question", item)
        if not isinstance(question, str) or not question.strip():
            raise self._fail(line, f"no question at {self.mapping.question!r} (keys: {', '.join(map(str, item))})",
                             "set the log's question path to where the question sits")
        answer = self._at("answer", item)
        if answer is not None and not isinstance(answer, str):
            answer = json.dumps(answer) if not isinstance(answer, (int, float)) else str(answer)
        refusal = self._at("refusal", item) if self.mapping.refusal is not None else None
        turn_id = self._at("id", item)
        conversation = self._at("conversation", item)
        stamp = self._at("timestamp", item)
        return LoggedTurn(
            line=line,
            id=str(turn_id) if turn_id not in (None, "") else f"line-{line}",
            question=self.redact(question.strip()) or "",
            answer=self.redact(answer),
            sources=self._list("sources", item, line),
            citations=self._list("citations", item, line) if self.mapping.citations is not None else None,
            refused=None if self.mapping.refusal is None else _truthy(refusal),
            latency_ms=self._time("latency", item, line),
            first_token_ms=self._time("ttft", item, line),
            timestamp=None if stamp in (None, "") else str(stamp),
            conversation=None if conversation in (None, "") else str(conversation),
        )

    def _list(self, name: str, item: Any, line: int) -> list[Any]:
        found = self._at(name, item)
        if found is None or found == "":
            return []
        if isinstance(found, str):
            return [part for part in _SPLIT.split(found.strip()) if part]
        if isinstance(found, list):
            return found
        if isinstance(found, (int, dict)):
            return [found]
        raise self._fail(line, f"{name} at {getattr(self.mapping, name)!r} is {type(found).__name__}, "
                               "where a list is wanted", f"point {name} at the list")

    def _time(self, name: str, item: Any, line: int) -> float | None:
        found = self._at(name, item)
        if found is None or found == "":
            return None
        try:
            if isinstance(found, list):
                if len(found) != 2 or found[0] in (None, "") or found[1] in (None, ""):
                    return None  # a turn that never painted has no first-token time
                value = (_instant(found[1]) - _instant(found[0])) * 1000.0
            else:
                value = float(found) * (1000.0 if self.mapping.time_unit == "s" else 1.0)
        except (TypeError, ValueError):
            raise self._fail(line, f"{name} at {getattr(self.mapping, name)!r} is {found!r}, which is no time",
                             "point it at a number, or at a list of two timestamps [start, end]") from None
        if value != value or value < 0 or value == float("inf"):
            raise self._fail(line, f"{name} is {value} ms", "a time is a finite number, 0 or more")
        return value


_FIELDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


class _Fields:
    """A JMESPath expression that is only field names joined by dots (`outputs.answer`), read without the parser.

    JMESPath reads `a.b` as: `b` of `a` when `a` is an object, else null; so does this.
    Most log paths are such, and the parser's walk is most of a turn's reading time.
    """

    def __init__(self, expression: str) -> None:
        self.names = expression.split(".")

    def search(self, item: Any) -> Any:
        for name in self.names:
            if not isinstance(item, dict):
                return None
            item = item.get(name)
        return item


def _compiled(expression: str) -> Any:
    """The expression, ready to search: dotted field names read directly, anything else by JMESPath."""
    return _Fields(expression) if _FIELDS.fullmatch(expression) else jmespath.compile(expression)


def _instant(value: Any) -> float:
    """Epoch seconds of an ISO 8601 text or a number of epoch seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _truthy(value: Any) -> bool:
    """A refusal flag as logs write it: booleans, numbers, and texts such as `true`, `yes`, `1`."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "refused", "y", "t")
    return bool(value)
