"""Logs: how a production log of an assistant's turns is read, each field a JMESPath expression.

A log is named under ``logs:`` and read by ``docpilot field LOG --log NAME``. One line of a
JSONL file, or one row of a CSV file (a mapping of column name to cell), is one turn; each
field below is a JMESPath expression into it, as a target's reply is read
(``docpilot.config.target.ReplyMapping``), and its sources become section ids by the same
``source_ids`` rules. So a vendor's export or an app's own log needs no code.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from docpilot.config.target import SourceMapping, _compiles


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LogMapping(_Strict):
    """One log's shape: where each fact of a turn sits in a line (JSONL) or a row (CSV)."""

    format: Literal["jsonl", "csv"] | None = None
    """`jsonl` (one JSON object a line) or `csv` (a header row, then one turn a row); unset, the file's
    ending decides (`.csv` is CSV, anything else JSONL)."""
    question: str
    """The question asked, such as `query` or `inputs.question`."""
    answer: str | None = None
    """The answer text, such as `response` or `outputs.answer`; unset, no turn has an answer."""
    sources: str | None = None
    """The list of sources shown with the answer, in order (such as `sources` or `outputs.documents`). In a
    CSV cell, a JSON list is read as one; other text is split at white space, commas and semicolons."""
    source_id: str = "@"
    """Within one source, where its URL, path or id is (such as `url`, `metadata.source`)."""
    citations: str | None = None
    """The list of what the answer cites, when the log gives it apart from the text: each a 1-based number
    into the sources or a source, read with `source_id`. Unset, the answer's `[n]` markers are read."""
    refusal: str | None = None
    """Where the turn says it refused (truthy means refused), such as `resolutionStatus == 'unanswered'`;
    unset, an answer that starts with `REFUSE: <cause>`, or a turn with no answer text, is a refusal."""
    latency: str | None = None
    """The turn's time: a number (in `time_unit`), or a list of two timestamps `[start, end]` (ISO 8601 or
    epoch seconds), such as `[start_time, end_time]`."""
    ttft: str | None = None
    """The time to the first answer text, read as `latency` is (such as `[start_time, first_token_time]`)."""
    time_unit: Literal["ms", "s"] = "ms"
    """The unit of a number `latency` or `ttft` finds: milliseconds or seconds."""
    timestamp: str | None = None
    """When the turn happened (ISO 8601 or epoch seconds), kept with the turn."""
    conversation: str | None = None
    """The conversation the turn belongs to (such as `thread_id`); turns are numbered within it."""
    id: str | None = None
    """The turn's own id; unset, the line number names it."""
    source_ids: SourceMapping = Field(default_factory=SourceMapping)
    """How a source becomes a DocPilot page or section id, as for a target (docs/targets.md#sources)."""
    redact: list[str] = Field(default_factory=list)
    """Regular expressions whose matches in the question and the answer read `[redacted]` before anything
    is scored or stored (emails, account numbers); key-shaped secrets are taken out as everywhere."""
    near_evidence: float = Field(default=0.5, ge=0, le=1)
    """A question has an answer near it in the docs when the section nearest it (by the retriever) holds at
    least this share of the question's words, each weighted by its rarity in the docs (a word the docs never
    use weighs most); below it the question is low-evidence, and its group is a page to write."""

    @field_validator("question", "answer", "sources", "source_id", "citations", "refusal", "latency",
                     "ttft", "timestamp", "conversation", "id")
    @classmethod
    def _is_jmespath(cls, expression: str | None) -> str | None:
        _compiles("log path", expression)
        return expression

    @field_validator("redact")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redact: {pattern!r} is not a regular expression ({exc})") from None
        return patterns
