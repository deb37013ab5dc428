"""The ``openai`` model: any OpenAI-compatible chat completions endpoint, streamed.

OpenAI, vLLM, llama.cpp's server and Ollama all serve ``POST {base_url}/chat/completions``.
The reply is read as server-sent events so that the time to the first answer text is
measured, and reasoning deltas (``reasoning_content`` or ``reasoning``) are kept apart
from the answer. A server that ignores ``stream`` and sends one JSON completion is read
too; such a turn never streamed, so its first token counts at its latency.

Times come from a monotonic clock started just before the first request is sent, so a
wait for a retry shows in them: that is what the user of the assistant would wait.

Faults never raise out of ``complete``: they end the turn with ``Turn.error``.

    retried (backoff, Retry-After)   429, 5xx, connection errors and timeouts,
                                      as long as no chunk has arrived
    reported at once                  other 4xx (with a fix), a stream cut midway,
                                      a stream without [DONE], a malformed chunk

The API key travels only in the ``Authorization`` header; error texts and ``repr``
never show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from docpilot.errors import ConfigError, ModelError
from docpilot.models.base import Prompt, Turn, parse_refusal
from docpilot.models.wire import decode_chunks, parse_retry_after, sse_data

_log = logging.getLogger(__name__)

KEY_VARIABLES: tuple[str, ...] = ("DOCPILOT_API_KEY", "OPENAI_API_KEY")
_EXCERPT = 200
_DRAIN_S = 1.0
_CONNECTIONS = 64
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# Keys echoed back by a service ("Incorrect API key provided: sk-...") are hidden too.
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-*.]{6,}")
_HINTS: dict[int, str] = {
    400: "the service rejected the request; check the model name and the parameters "
    "(temperature, max_tokens, seed, stream_options) it accepts",
    401: "check DOCPILOT_API_KEY (or OPENAI_API_KEY) holds a valid key for this endpoint",
    403: "the key is not allowed to use this model; check DOCPILOT_API_KEY and the account's access",
    404: "check that base_url ends with /v1 and that the server serves the model",
    413: "the prompt is too large for the service; prime fewer or shorter sources",
    422: "the service could not read the request; check the model name and parameters",
}


def api_key_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The API key from ``DOCPILOT_API_KEY``, else ``OPENAI_API_KEY``; None when neither is set."""
    for name in KEY_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


class _Retryable(Exception):
    """An attempt failed before anything streamed; another attempt may succeed."""

    def __init__(self, message: str, hint: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.retry_after = retry_after


class _Progress:
    """What one turn has received so far, kept across attempts and a timeout."""

    def __init__(self, listener: Callable[[str, str], None] | None = None) -> None:
        self.listener = listener
        self.started: float | None = None
        self.ended_ms: float | None = None
        self.answer: list[str] = []
        self.reasoning: list[str] = []
        self.first_token_ms: float | None = None
        self.first_thought_ms: float | None = None
        self.usage: dict[str, int] = {}
        self.chunks = 0

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0 if self.started is not None else 0.0

    def take_message(self, piece: Mapping[str, Any], now_ms: float) -> None:
        """Add one streamed delta or one whole message to the turn."""
        content = piece.get("content")
        if isinstance(content, str) and content:
            self.answer.append(content)
            if self.first_token_ms is None:
                self.first_token_ms = now_ms
            if self.listener is not None:
                self.listener("token", content)
        # Services name the field differently; one that sends both repeats the same text.
        thought = piece.get("reasoning_content") or piece.get("reasoning")
        if isinstance(thought, str) and thought:
            self.reasoning.append(thought)
            if self.first_thought_ms is None:
                self.first_thought_ms = now_ms
            if self.listener is not None:
                self.listener("thought", thought)

    def take_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self.usage = {k: int(usage[k]) for k in _USAGE_KEYS if isinstance(usage.get(k), int)}

    def to_turn(self, error: str | None) -> Turn:
        answer = "".join(self.answer)
        cause = parse_refusal(answer) if error is None else None
        latency = self.ended_ms if self.ended_ms is not None else self.elapsed_ms()
        return Turn(
            answer=answer,
            reasoning="".join(self.reasoning) or None,
            refused=cause is not None,
            refusal_cause=cause,
            latency_ms=latency if self.started is not None else None,
            first_token_ms=self.first_token_ms,
            first_thought_ms=self.first_thought_ms,
            usage=self.usage,
            error=error,
        )


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[:_EXCERPT] + "…"


def _is_retryable_status(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~0.1 s; a run makes one client per few concurrent turns,
    # so they all share one context.
    return httpx.create_ssl_context()  # what httpx would build per client, SSL_CERT_FILE included


class OpenAIModel:
    """A chat model behind an OpenAI-compatible endpoint; one instance serves many concurrent turns."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = 0,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 8.0,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"the openai model needs an http(s) base_url, got {base_url!r}",
                hint="pass e.g. --base-url http://localhost:8000/v1",
            )
        if not model:
            raise ConfigError("the openai model needs a model name", hint="set model.name in the config")
        if timeout_s <= 0 or retries < 0 or backoff_base_s < 0 or backoff_cap_s < 0:
            raise ConfigError(
                f"timeout_s must be > 0 and retries and backoff >= 0, got timeout_s={timeout_s}, "
                f"retries={retries}, backoff_base_s={backoff_base_s}, backoff_cap_s={backoff_cap_s}",
                hint="fix model.timeout_s / model.retries in the config",
            )
        if client is not None and transport is not None:
            raise ValueError("pass either client or transport, not both")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._api_key = api_key or None
        self._owns_client = client is None
        # As many kept-alive connections as open ones: with fewer, httpcore closes and reopens
        # connections whenever more turns than the keep-alive limit are in flight.
        limits = httpx.Limits(max_connections=_CONNECTIONS, max_keepalive_connections=_CONNECTIONS)
        self._client = client or httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(timeout_s), limits=limits, verify=_tls_context()
        )
        self._url = f"{self.base_url}/chat/completions"

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAIModel(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this model made it; a client passed in stays open."""
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, prompt: Prompt) -> AsyncIterator[tuple[str, str]]:
        """The reply as it arrives: ``("thought", text)`` and ``("token", text)`` pieces.

        Retries happen only before anything has streamed, so no piece is sent twice. A
        turn that fails raises ModelError after the pieces that did arrive. Closing the
        iterator early (a reader who went away) cancels the request.
        """
        pieces: asyncio.Queue = asyncio.Queue()
        finished = object()

        async def run() -> Turn:
            try:
                return await self.complete(prompt, _listener=lambda kind, text: pieces.put_nowait((kind, text)))
            finally:
                pieces.put_nowait(finished)

        turn_task = asyncio.create_task(run())
        try:
            while (piece := await pieces.get()) is not finished:
                yield piece
            turn = await turn_task
        finally:
            turn_task.cancel()
        if turn.error is not None:
            raise ModelError(turn.error)

    async def complete(self, prompt: Prompt, *, _listener: Callable[[str, str], None] | None = None) -> Turn:
        """Answer one prompt; a service fault ends the turn with ``Turn.error`` instead of raising."""
        progress = _Progress(_listener)
        try:
            async with asyncio.timeout(self.timeout_s):
                error = await self._attempts(self._body(prompt), progress)
        except TimeoutError:
            error = (
                f"no complete reply from {self._url} within timeout_s={self.timeout_s:g} s "
                f"({progress.chunks} chunks received); fix: raise model.timeout_s or check the server's load"
            )
        return progress.to_turn(self._redact(error) if error else None)

    def _body(self, prompt: Prompt) -> dict[str, Any]:
        # A prompt built without the primer still asks its question.
        messages = prompt.messages or [{"role": "user", "content": prompt.question}]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return _KEYLIKE.sub("[redacted]", text)

    def _backoff_s(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)
        # Jitter spreads out the retries of many concurrent turns that failed together.
        return ceiling * random.uniform(0.5, 1.0)

    async def _attempts(self, body: dict[str, Any], progress: _Progress) -> str | None:
        """Run attempts until one ends the turn; the error text, or None on success."""
        deadline = time.perf_counter() + self.timeout_s
        for attempt in range(self.retries + 1):
            try:
                return await self._attempt(body, progress)
            except _Retryable as fault:
                tries = attempt + 1
                if attempt == self.retries:
                    return f"{fault.message} (gave up after {tries} attempts); fix: {fault.hint}"
                wait = fault.retry_after if fault.retry_after is not None else self._backoff_s(attempt)
                if time.perf_counter() + wait >= deadline:
                    return (
                        f"{fault.message}; the next attempt (in {wait:.1f} s) would pass "
                        f"timeout_s={self.timeout_s:g} s (gave up after {tries} attempts); fix: {fault.hint}"
                    )
                _log.debug("retrying %s in %.2f s: %s", self._url, wait, self._redact(fault.message))
                await asyncio.sleep(wait)
        return None  # unreachable: the last attempt returns above

    async def _attempt(self, body: dict[str, Any], progress: _Progress) -> str | None:
        """One request; the error text, None on success; raises _Retryable when it may be retried."""
        if progress.started is None:
            progress.started = time.perf_counter()
        try:
            async with self._client.stream("POST", self._url, json=body, headers=self._headers()) as response:
                if response.status_code >= 400:
                    return await self._read_failure(response)
                content_type = response.headers.get("content-type", "")
                if content_type.split(";")[0].strip().lower() == "application/json":
                    return await self._read_completion(response, progress)
                return await self._read_stream(response, progress, content_type)
        except httpx.RequestError as exc:
            reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
            if progress.chunks == 0:
                raise _Retryable(
                    f"cannot get a reply from {self._url} ({reason})",
                    hint="check base_url and that the server is running and reachable",
                ) from exc
            return (
                f"stream ended before [DONE] after {progress.chunks} chunks ({reason}); "
                "fix: the server dropped the connection; check its logs and retry the run"
            )

    async def _read_failure(self, response: httpx.Response) -> str:
        status = response.status_code
        detail = _excerpt((await response.aread()).decode("utf-8", errors="replace"))
        message = f"HTTP {status} from {self._url}: {detail}"
        if _is_retryable_status(status):
            hint = (
                "the service is rate limiting; lower the concurrency or retry later"
                if status == 429
                else "the service is failing; retry later or check its logs"
            )
            raise _Retryable(message, hint, parse_retry_after(response.headers.get("retry-after")))
        hint = _HINTS.get(status, "check base_url, the model name and the API key")
        return f"{message}; fix: {hint}"

    async def _read_completion(self, response: httpx.Response, progress: _Progress) -> str | None:
        """Read a whole JSON completion from a server that did not stream."""
        raw = (await response.aread()).decode("utf-8", errors="replace")
        now = progress.elapsed_ms()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if isinstance(payload, Mapping) and payload.get("error"):
            return f"the service reported an error: {_excerpt(json.dumps(payload['error']))}"
        choices = payload.get("choices") if isinstance(payload, Mapping) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], Mapping) else None
        if not isinstance(message, Mapping):
            return (
                f"cannot read the JSON completion {_excerpt(raw)!r}; "
                "fix: check base_url points at an OpenAI-compatible /v1 endpoint"
            )
        progress.chunks = 1
        progress.take_message(message, now)
        progress.take_usage(payload.get("usage"))
        progress.ended_ms = now
        return None

    async def _read_stream(
        self, response: httpx.Response, progress: _Progress, content_type: str
    ) -> str | None:
        """Read server-sent chunks up to [DONE]; the error text, or None on success."""
        lines = response.aiter_lines()
        async for data in sse_data(lines):
            if data == "[DONE]":
                progress.ended_ms = progress.elapsed_ms()
                # Reading the body to its end lets the connection serve the next turn.
                with contextlib.suppress(httpx.HTTPError, TimeoutError):
                    async with asyncio.timeout(_DRAIN_S):
                        async for _ in lines:
                            pass
                return None
            try:
                chunks = decode_chunks(data)
            except ValueError:
                return (
                    f"malformed JSON in stream chunk {progress.chunks + 1}: {_excerpt(data)!r}; "
                    "fix: the server sent a broken chunk; check its version and logs"
                )
            now = progress.elapsed_ms()
            for chunk in chunks:
                progress.chunks += 1
                if not isinstance(chunk, Mapping):
                    return f"stream chunk {progress.chunks} is not a JSON object: {_excerpt(data)!r}"
                if chunk.get("error"):
                    return f"the service reported an error mid-stream: {_excerpt(json.dumps(chunk['error']))}"
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") if isinstance(choice, Mapping) else None
                    if isinstance(delta, Mapping) and choice.get("index", 0) == 0:
                        progress.take_message(delta, now)
                progress.take_usage(chunk.get("usage"))
        if progress.chunks == 0:
            return (
                f"the reply from {self._url} (content-type {content_type or 'none'}) held no chunks; "
                "fix: check base_url points at an OpenAI-compatible /v1 endpoint"
            )
        return (
            f"stream ended before [DONE] after {progress.chunks} chunks; "
            "fix: the server closed the stream early; check its logs and retry the run"
        )
