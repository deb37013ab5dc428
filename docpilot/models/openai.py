"""The ``openai`` model: any OpenAI-compatible chat completions endpoint, streamed.

OpenAI, vLLM, llama.cpp's server and Ollama all serve ``POST {base_url}/chat/completions``.
The reply is read as server-sent events so that the time to the first answer text is
measured, and reasoning deltas (``reasoning_content`` or ``reasoning``) are kept apart
from the answer. A server that ignores ``stream`` and sends one JSON completion is read
too; such a turn never streamed, so its first token counts at its latency.

Times come from a monotonic clock started just before the first request is sent, so a
wait for a retry shows in them: that is what the user of the assistant would wait.

Faults never raise out of ``complete``: they end the turn with ``Turn.error`` and its
``error_code`` (in brackets).

    retried (backoff, Retry-After)   429 [rate_limit], 5xx [http_status], connection errors
                                      [connect] and timeouts [timeout], until a chunk arrives
    reported at once                  other 4xx, with a fix [auth: 401, 403; else http_status],
                                      a stream cut or without [DONE] [incomplete], a malformed
                                      chunk [malformed], an error in the reply [service_error],
                                      no finish_reason [unfinished], a finished reply with no
                                      answer text and no refusal [empty]

The API key travels only in the ``Authorization`` header; error texts and ``repr``
never show it.

Requests go over one aiohttp session per model and event loop, made on first use, with
up to 64 kept-alive connections, the process's one TLS context (``SSL_CERT_FILE``,
``SSL_CERT_DIR``, else certifi's bundle) and the proxy ``HTTP(S)_PROXY`` / ``NO_PROXY``
name for ``base_url``. A session passed in is used as it is and left open.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from yarl import URL

from docpilot.errors import ConfigError, ModelError
from docpilot.models.base import Fault, Prompt, Turn, finish_piece
from docpilot.models.replies import Retryable, read_completion, read_failure, read_stream
from docpilot.models.wire import PartialTurn
from docpilot.net.body import read_at_most
from docpilot.net.connection import (
    close_abandoned,
    env_proxy,
    new_session,
    tls_context,
)
from docpilot.net.retry import RetryPolicy
from docpilot.redact import redact

if TYPE_CHECKING:
    from docpilot.config.model import ModelConfig
    from docpilot.corpus.pages import Corpus

_log = logging.getLogger(__name__)

_PROBE_BYTES = 1 << 20  # of the probe's one-token reply


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
        session: aiohttp.ClientSession | None = None,
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
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.timeout_s = timeout_s
        self.retries = retries
        # A Retry-After is obeyed whole: the turn's own timeout decides whether it is waited for.
        self._retry = RetryPolicy(retries, backoff_base_s, backoff_cap_s, retry_after_cap_s=float("inf"))
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._api_key = api_key or None
        self._url = f"{self.base_url}/chat/completions"
        self._session = session
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._owns_session = session is None
        # Connecting and every read wait at most timeout_s; the whole turn is bounded apart.
        self._request_options: dict[str, Any] = {
            "timeout": aiohttp.ClientTimeout(
                total=None, connect=timeout_s, sock_connect=timeout_s, sock_read=timeout_s
            ),
            "allow_redirects": False,
        }
        self._headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"
        self._tls: ssl.SSLContext | None = None
        if self._owns_session:
            # Read from the environment once, where aiohttp's trust_env would read it again
            # for every request, in a worker thread (with ~/.netrc): more CPU than the turn.
            proxy, credentials = env_proxy(URL(self._url))
            if self._url.startswith("https:") or (proxy is not None and proxy.scheme == "https"):
                self._tls = tls_context()  # certificates are read only for a connection that speaks TLS
            if proxy is not None:
                self._request_options["proxy"] = proxy
            if credentials is not None and self._url.startswith("https:"):
                self._request_options["proxy_headers"] = {"Proxy-Authorization": credentials}
            elif credentials is not None:  # a plain request goes to the proxy itself
                self._headers["Proxy-Authorization"] = credentials

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAIModel(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session if this model made it; a session passed in stays open."""
        if not self._owns_session or self._session is None:
            return
        session, loop = self._session, self._session_loop
        self._session = self._session_loop = None
        if loop is asyncio.get_running_loop():
            await session.close()
        elif loop is not None:
            close_abandoned(session, loop)

    def _session_here(self) -> aiohttp.ClientSession:
        """The session for the running event loop, made on first use.

        aiohttp sessions belong to the loop they were made in, so a model used from a new
        loop (a second ``asyncio.run``) lets the old session go and makes a fresh one.
        """
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and (loop is self._session_loop or not self._owns_session):
            return session
        if session is not None and self._session_loop is not None:
            close_abandoned(session, self._session_loop)
        self._session = new_session(self._tls)
        self._session_loop = loop
        return self._session

    async def first_reply(self) -> tuple[int, str]:
        """The status and body of one unstreamed request for a single token, as ``probe_endpoint`` sends it.

        It goes the way every turn goes (this model's session, headers, proxy and
        timeouts) and is never retried; a connection that cannot be made raises
        aiohttp's ``ClientConnectorError``.
        """
        body = {"model": self.model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
                "stream": False}
        async with self._session_here().post(
            self._url, data=orjson.dumps(body), headers=self._headers, **self._request_options
        ) as response:
            body, _ = await read_at_most(response, _PROBE_BYTES)
            return response.status, body.decode("utf-8", errors="replace")

    async def stream(self, prompt: Prompt) -> AsyncIterator[tuple[str, str]]:
        """The reply as it arrives: ``("thought", text)`` and ``("token", text)`` pieces, then
        one ``("finish", json)`` piece with the turn's finish_reason and usage (``finish_piece``).

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
            raise ModelError(turn.error, code=turn.error_code)
        yield "finish", finish_piece(turn)

    async def complete(self, prompt: Prompt, *, _listener: Callable[[str, str], None] | None = None) -> Turn:
        """Answer one prompt; a service fault ends the turn with ``Turn.error`` instead of raising."""
        progress = PartialTurn(_listener, max_tokens=self.max_tokens)
        try:
            async with asyncio.timeout(self.timeout_s):
                fault = await self._attempts(self._body(prompt), progress)
        except TimeoutError:
            fault = Fault("timeout", (
                f"no complete reply from {self._url} within timeout_s={self.timeout_s:g} s "
                f"({progress.chunks} chunks received); fix: raise model.timeout_s or check the server's load"
            ))
        return progress.to_turn(fault._replace(message=self._redact(fault.message)) if fault else None)

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

    def _redact(self, text: str) -> str:
        return redact(text, self._api_key)

    async def _attempts(self, body: dict[str, Any], progress: PartialTurn) -> Fault | None:
        """Run attempts until one ends the turn; the fault, or None on success."""
        deadline = time.perf_counter() + self.timeout_s
        for attempt in range(self.retries + 1):
            try:
                return await self._attempt(body, progress)
            except Retryable as fault:
                tries = attempt + 1
                if self._retry.gives_up(attempt):
                    return Fault(fault.code, f"{fault.message} (gave up after {tries} attempts); fix: {fault.hint}")
                wait = self._retry.wait_s(attempt, fault.retry_after)
                if time.perf_counter() + wait >= deadline:
                    return Fault(fault.code, (
                        f"{fault.message}; the next attempt (in {wait:.1f} s) would pass "
                        f"timeout_s={self.timeout_s:g} s (gave up after {tries} attempts); fix: {fault.hint}"
                    ))
                _log.debug("retrying %s in %.2f s: %s", self._url, wait, self._redact(fault.message))
                await asyncio.sleep(wait)
        return None  # unreachable: the last attempt returns above

    async def _attempt(self, body: dict[str, Any], progress: PartialTurn) -> Fault | None:
        """One request; the fault, None on success; raises Retryable when it may be retried."""
        session = self._session_here()
        if progress.started is None:
            progress.started = time.perf_counter()
        try:
            async with session.post(
                self._url, data=orjson.dumps(body), headers=self._headers, **self._request_options
            ) as response:
                if response.status >= 400:
                    return await read_failure(response, self._url)
                content_type = response.headers.get("content-type", "")
                if content_type.split(";")[0].strip().lower() == "application/json":
                    return await read_completion(response, progress, max_tokens=self.max_tokens)
                return await read_stream(response, progress, content_type, self._url)
        # aiohttp's own timeouts (connect, socket read) are ClientErrors and TimeoutErrors both;
        # the turn's budget is not caught here, as it cancels the attempt instead.
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
            if progress.chunks == 0:
                raise Retryable(
                    "timeout" if isinstance(exc, TimeoutError) else "connect",
                    f"cannot get a reply from {self._url} ({reason})",
                    hint="check base_url and that the server is running and reachable",
                ) from exc
            return Fault("incomplete", (
                f"stream ended before [DONE] after {progress.chunks} chunks ({reason}); "
                "fix: the server dropped the connection; check its logs and retry the run"
            ))


def build(settings: ModelConfig, *, corpus: Corpus, idf: object = None) -> OpenAIModel:
    """The model behind the settings' OpenAI-compatible endpoint, with the environment's API key."""
    from docpilot.net.keys import api_key_from_env

    if not settings.base_url:
        raise ConfigError(
            "the openai provider needs an endpoint",
            hint="pass --base-url http://HOST:PORT/v1 or set model.base_url in the config",
        )
    return client(settings, api_key=api_key_from_env())


def client(settings: ModelConfig, *, api_key: str | None) -> OpenAIModel:
    """An OpenAI-compatible client with the settings' sampling, timeout and retries."""
    return OpenAIModel(
        base_url=settings.base_url, model=settings.name, api_key=api_key, temperature=settings.temperature,
        max_tokens=settings.max_tokens, seed=settings.seed, timeout_s=settings.timeout_s, retries=settings.retries,
    )
