"""Reading one reply of an OpenAI-compatible endpoint: an error status, a JSON completion, or a stream of events.

Each reader fills the turn's ``PartialTurn`` and returns the ``Fault`` that ended the
turn, or None when it finished; a status worth another attempt raises ``Retryable``,
which ``docpilot.models.openai`` retries with backoff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aiohttp

from docpilot.models.base import Fault
from docpilot.models.wire import PartialTurn, excerpt, line_limit, reply_char_limit
from docpilot.net.body import drain, read_at_most
from docpilot.net.retry import parse_retry_after
from docpilot.net.sse import EventReader, LineTooLong
from docpilot.schema import ErrorCode

_FAILURE_BYTES = 65_536  # of an error body, whose excerpt the turn's error shows
_HINTS: dict[int, str] = {
    400: "the service rejected the request; check the model name and the parameters "
    "(temperature, max_tokens, seed, stream_options) it accepts",
    401: "check DOCPILOT_API_KEY (or OPENAI_API_KEY) holds a valid key for this endpoint",
    403: "the key is not allowed to use this model; check DOCPILOT_API_KEY and the account's access",
    404: "check that base_url ends with /v1 and that the server serves the model",
    413: "the prompt is too large for the service; prime fewer or shorter sources",
    422: "the service could not read the request; check the model name and parameters",
}


class Retryable(Exception):
    """An attempt failed before anything streamed; another attempt may succeed."""

    def __init__(self, code: ErrorCode, message: str, hint: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


async def read_failure(response: aiohttp.ClientResponse, url: str) -> Fault:
    """The fault of an HTTP error reply; raises ``Retryable`` for a status worth another attempt."""
    status = response.status
    # Only an excerpt is shown, so no more than a few of its kilobytes are read.
    body, _ = await read_at_most(response, _FAILURE_BYTES)
    detail = excerpt(body.decode("utf-8", errors="replace"))
    message = f"HTTP {status} from {url}: {detail}"
    if is_retryable_status(status):
        hint = (
            "the service is rate limiting; lower the concurrency or retry later"
            if status == 429
            else "the service is failing; retry later or check its logs"
        )
        code: ErrorCode = "rate_limit" if status == 429 else "http_status"
        raise Retryable(code, message, hint, parse_retry_after(response.headers.get("retry-after")))
    hint = _HINTS.get(status, "check base_url, the model name and the API key")
    return Fault("auth" if status in (401, 403) else "http_status", f"{message}; fix: {hint}")

async def read_completion(response: aiohttp.ClientResponse, progress: PartialTurn, *, max_tokens: int) -> Fault | None:
    """Read a whole JSON completion from a server that did not stream."""
    limit = progress.line_limit or line_limit(reply_char_limit(max_tokens))
    body, whole = await read_at_most(response, limit)
    if not whole:
        response.close()  # the rest of the body is never read
        return progress.too_long(f"a JSON completion longer than {limit} bytes")
    raw = body.decode("utf-8", errors="replace")
    now = progress.elapsed_ms()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if isinstance(payload, Mapping) and payload.get("error"):
        return Fault("service_error", f"the service reported an error: {excerpt(json.dumps(payload['error']))}")
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    message = choices[0].get("message") if choices and isinstance(choices[0], Mapping) else None
    if not isinstance(message, Mapping):
        return Fault("malformed", (
            f"cannot read the JSON completion {excerpt(raw)!r}; "
            "fix: check base_url points at an OpenAI-compatible /v1 endpoint"
        ))
    progress.chunks = 1
    fault = progress.take_message(message, now)
    progress.take_finish(choices[0].get("finish_reason"))
    fault = fault or progress.take_usage(payload.get("usage"))
    progress.ended_ms = now
    return fault

async def read_stream(
response: aiohttp.ClientResponse, progress: PartialTurn, content_type: str, url: str
) -> Fault | None:
    """Read server-sent chunks up to [DONE]; the fault, or None on success.

    A reply past its cap (``PartialTurn``), or a line longer than any such reply could
    need, ends the turn at once and closes the connection: nothing more of it is read.
    """
    events = EventReader(max_line=progress.line_limit)
    # Lines are cut here: aiohttp's readline knows only "\n" line ends and refuses a line
    # longer than its buffer (128 KiB), which one long answer in one chunk can exceed.
    async for piece in response.content.iter_any():
        try:
            completed = events.feed(piece)
        except LineTooLong as exc:
            response.close()
            return progress.too_long(f"a line of the stream longer than {exc.limit} characters")
        for data in completed:
            if data == "[DONE]":
                progress.ended_ms = progress.elapsed_ms()
                await drain(response)
                return None
            error = progress.take_event(data)
            if error is not None:
                if error.code == "reply_too_long":
                    response.close()
                return error
    if events.close():  # the body ended in [DONE] without the blank line after it
        progress.ended_ms = progress.elapsed_ms()
        return None
    if progress.chunks == 0:
        return Fault("malformed", (
            f"the reply from {url} (content-type {content_type or 'none'}) held no chunks; "
            "fix: check base_url points at an OpenAI-compatible /v1 endpoint"
        ))
    return Fault("incomplete", (
        f"stream ended before [DONE] after {progress.chunks} chunks; "
        "fix: the server closed the stream early; check its logs and retry the run"
    ))
