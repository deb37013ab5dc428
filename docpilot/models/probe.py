"""Making sure a model endpoint can answer before its answers are trusted.

A wrong key, a wrong URL or a server that is not running would fail every turn in the
same way, and a run would score nothing but errors. An eval reads its first reply
strictly instead (``fault_of``): a 401, 403 or 404, or a refused connection, stops the
run with exit 2 and the service's own reason (the key never shown) and the fix, and no
extra request is sent. A process with no first reply to read (``docpilot serve`` as it
starts, a drafting run) asks for one token first (``probe_endpoint``). Anything else
(an answer, a 429, a 5xx) lets the run go on: the run's retries and error rows deal
with a service that is only busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import aiohttp

from docpilot.config.model import Config
from docpilot.errors import ConfigError
from docpilot.models.base import Turn
from docpilot.models.openai import OpenAIModel
from docpilot.models.wire import excerpt
from docpilot.net.keys import api_key_from_env
from docpilot.redact import redact

_FATAL = {
    401: "check DOCPILOT_API_KEY (or OPENAI_API_KEY) holds a valid key for this endpoint",
    403: "the key is not allowed to use this model; check DOCPILOT_API_KEY and the account's access",
    404: "check that the base URL ends with /v1 and that the server serves the model named by --model",
}


def probe_endpoint(base_url: str, model: str, api_key: str | None, *, timeout_s: float = 30.0) -> None:
    """Ask ``base_url`` for a one-token completion; ConfigError when it cannot serve the run.

    The request goes through the run's own model client, so it takes the route the
    turns will take (proxy, certificates, headers).
    """
    client = OpenAIModel(base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s, retries=0)
    url = f"{client.base_url}/chat/completions"

    async def ask() -> tuple[int, str]:
        try:
            return await client.first_reply()
        finally:
            await client.aclose()

    try:
        status, text = asyncio.run(ask())
    except aiohttp.ClientConnectorError as exc:
        raise ConfigError(
            f"cannot connect to the model endpoint {url} ({redact(str(exc), api_key) or type(exc).__name__})",
            hint="start the server, or pass the right --base-url (such as http://127.0.0.1:8080/v1)",
        ) from None
    except (aiohttp.ClientError, TimeoutError):
        return  # slow or flaky, not wrong: the run's retries and timeouts decide
    hint = _FATAL.get(status)
    if hint is None:
        return
    reason = redact(_service_reason(text), api_key)
    raise ConfigError(f"the model endpoint {url} answered HTTP {status}: {reason}", hint=hint)


def _service_reason(text: str) -> str:
    """The service's own words: ``error.message`` of an OpenAI-style body, else the body itself."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return excerpt(error["message"])
    if isinstance(error, str):
        return excerpt(error)
    return excerpt(text) or "(an empty body)"


def fault_of(turn: Turn, url: str | None) -> ConfigError | None:
    """What a run's first reply says about its endpoint: a ConfigError when no turn of the run could be
    answered (no connection, a key refused, no such model or path), else None (an answer, or a fault a
    later turn may not share: it becomes that turn's error row)."""
    fatal = turn.error_code in ("connect", "auth") or (
        turn.error_code == "http_status" and (turn.error or "").startswith("HTTP 404"))
    if turn.error is None or not fatal:
        return None
    message, _, hint = turn.error.partition("; fix: ")
    where = f"the model endpoint {url}" if url else "the model endpoint"
    if turn.error_code == "connect":
        return ConfigError(f"cannot connect to {where} ({message})",
                           hint="start the server, or pass the right --base-url (such as http://127.0.0.1:8080/v1)")
    return ConfigError(f"{where} cannot answer the run: {message}", hint=hint or _FATAL.get(404))


@contextlib.contextmanager
def served_endpoint(config: Config) -> Iterator[Config]:
    """The config a run sends its turns with: for the ``local`` provider without a ``base_url``, pointing at
    its server, started for the block; else the config as it is (nothing is asked: ``fault_of`` reads the
    run's first reply)."""
    from docpilot.models.registry import provider_of

    settings = config.model
    if provider_of(settings).endpoint != "served" or settings.base_url:
        yield config
        return
    from docpilot.models.local import serve_local

    with serve_local(settings.path, name=settings.name, seed=settings.seed, threads=settings.threads) as url:
        yield config.model_copy(update={"model": settings.model_copy(update={"base_url": url})})


@dataclass(frozen=True)
class Ready:
    """Call it before a run's first turn, for the config to run with (``ready_endpoint``)."""

    get: Callable[[], Config]
    """The run's config with its model endpoint up and checked; ConfigError (exit 2) when it cannot serve."""
    costly: Callable[[], bool] = lambda: False
    """Whether calling it would start something (the local provider's server) rather than
    return at once or wait for the probe already sent."""

    def __call__(self) -> Config:
        return self.get()


@contextlib.contextmanager
def ready_endpoint(config: Config) -> Iterator[Ready]:
    """For the duration of the block, ``ready``: call it before the first turn, for the config to run with.

    ``ready()`` returns the run's config with its model endpoint up and checked, or
    raises ConfigError (exit 2) when the endpoint cannot serve the run. The extractive
    model needs nothing. An ``openai`` endpoint's probe is sent at once, on a thread of
    its own, so its round trip overlaps whatever the caller loads before it asks; a
    caller that fails meanwhile (a broken golden set) does not wait for it. The
    ``local`` provider's server is started by the first ``ready()``, in the caller's
    thread (the server is tied to the thread that started it and stops with it), and
    stopped after the block; the config given back points at it.
    """
    from docpilot.models.registry import provider_of

    settings = config.model
    provider = provider_of(settings)
    if provider.endpoint == "none":
        yield Ready(lambda: config)
        return
    if provider.endpoint == "served" and not settings.base_url:
        from docpilot.models.local import serve_local

        with contextlib.ExitStack() as stack:
            served: list[Config] = []

            def start() -> Config:
                if not served:
                    url = stack.enter_context(serve_local(settings.path, name=settings.name, seed=settings.seed,
                                                          threads=settings.threads))
                    probe_endpoint(url, settings.name, None, timeout_s=settings.timeout_s)
                    served.append(config.model_copy(update={"model": settings.model_copy(update={"base_url": url})}))
                return served[0]

            yield Ready(start, costly=lambda: not served)
        return
    # A local model whose server is already up (started by the process that launched this
    # one) is probed like any endpoint.
    if not settings.base_url:
        raise ConfigError(
            "the openai provider needs an endpoint",
            hint="pass --base-url http://HOST:PORT/v1 or set model.base_url in the config",
        )
    key = api_key_from_env() if provider.api_key else None
    probed: Future[None] = Future()

    def probe() -> None:
        try:
            probe_endpoint(settings.base_url, settings.name, key, timeout_s=settings.timeout_s)
        except BaseException as error:  # handed to the caller's thread, which reports it
            probed.set_exception(error)
        else:
            probed.set_result(None)

    thread = threading.Thread(target=probe, name="docpilot-probe", daemon=True)
    thread.start()

    def checked() -> Config:
        probed.result()
        thread.join()  # ended, not only done: a process may fork once it has its answer (``run.variants``)
        return config

    yield Ready(checked)
