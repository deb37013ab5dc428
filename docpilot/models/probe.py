"""Making sure a run's model endpoint can answer before the run spends its golden set on it.

A wrong key, a wrong URL or a server that is not running would fail every turn of a
run in the same way, and the run would score nothing but errors. ``probe_endpoint``
asks for one token first: a 401, 403 or 404, or a refused connection, stops the run
with exit 2 before the first record, with the service's own reason (the key never
shown) and the fix. Anything else (an answer, a 429, a 5xx) lets the run go on: the
run's own retries and error rows deal with a service that is only busy.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx

from docpilot.config.model import Config
from docpilot.config.redact import redact
from docpilot.errors import ConfigError
from docpilot.models.connection import tls_context
from docpilot.models.keys import api_key_from_env
from docpilot.models.wire import excerpt

_FATAL = {
    401: "check DOCPILOT_API_KEY (or OPENAI_API_KEY) holds a valid key for this endpoint",
    403: "the key is not allowed to use this model; check DOCPILOT_API_KEY and the account's access",
    404: "check that the base URL ends with /v1 and that the server serves the model named by --model",
}


def probe_endpoint(base_url: str, model: str, api_key: str | None, *, timeout_s: float = 30.0) -> None:
    """Ask ``base_url`` for a one-token completion; ConfigError when it cannot serve the run."""
    url = f"{base_url.rstrip('/')}/chat/completions"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "stream": False}
    verify = tls_context() if url.startswith("https:") else True
    try:
        with httpx.Client(timeout=timeout_s, verify=verify) as client:
            response = client.post(url, json=body, headers=headers)
    except httpx.ConnectError as exc:
        raise ConfigError(
            f"cannot connect to the model endpoint {url} ({redact(str(exc), api_key) or type(exc).__name__})",
            hint="start the server, or pass the right --base-url (such as http://127.0.0.1:8080/v1)",
        ) from None
    except httpx.HTTPError:
        return  # slow or flaky, not wrong: the run's retries and timeouts decide
    hint = _FATAL.get(response.status_code)
    if hint is None:
        return
    reason = redact(_service_reason(response), api_key)
    raise ConfigError(f"the model endpoint {url} answered HTTP {response.status_code}: {reason}", hint=hint)


def _service_reason(response: httpx.Response) -> str:
    """The service's own words: ``error.message`` of an OpenAI-style body, else the body itself."""
    text = response.text
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return excerpt(error["message"])
    if isinstance(error, str):
        return excerpt(error)
    return excerpt(text) or "(an empty body)"


@contextlib.contextmanager
def ready_endpoint(config: Config) -> Iterator[Config]:
    """The run's config with its model endpoint up and checked, for the duration of the block.

    The extractive model needs nothing. The ``local`` provider's server is started here
    (and stopped after the block), and the config given back points at it. An ``openai``
    endpoint is probed once; ConfigError (exit 2) when it cannot serve the run.
    """
    settings = config.model
    if settings.provider == "extractive":
        yield config
        return
    if settings.provider == "local" and not settings.base_url:
        from docpilot.models.local import serve_local

        with serve_local(settings.path, name=settings.name, seed=settings.seed) as url:
            served = config.model_copy(update={"model": settings.model_copy(update={"base_url": url})})
            probe_endpoint(url, settings.name, None, timeout_s=settings.timeout_s)
            yield served
        return
    # A local model whose server is already up (started by the process that launched this
    # one) is probed like any endpoint.
    if not settings.base_url:
        raise ConfigError(
            "the openai provider needs an endpoint",
            hint="pass --base-url http://HOST:PORT/v1 or set model.base_url in the config",
        )
    key = api_key_from_env() if settings.provider == "openai" else None
    probe_endpoint(settings.base_url, settings.name, key, timeout_s=settings.timeout_s)
    yield config
