"""The eval's check of a server's bearer token, made once before the first question.

An eval in the server runtime sends every question with ``DOCPILOT_SERVER_TOKEN``.
Were the token missing or wrong, every question would come back ``401`` and the run
would store a report of errored rows; ``check_token`` asks once instead, and stops
the eval with the fix.
"""

from __future__ import annotations

import os

import httpx

from docpilot.api.client import ask_url
from docpilot.api.schema import TOKEN_VARIABLE
from docpilot.errors import ConfigError


def check_token(url: str, token: str | None = None, *, timeout_s: float = 10.0) -> None:
    """Fail before the first question when the server refuses the token (or its absence); ConfigError.

    One request, which answers no question: ``POST /v1/ask`` with an empty JSON object.
    The server checks the token before it reads the body, so 401 means the token was
    refused, and anything else (422: the body names no question) means it passed.
    ``url`` is the server's base URL or its ask endpoint; ``token`` defaults to
    ``DOCPILOT_SERVER_TOKEN``.
    """
    token = (token if token is not None else os.environ.get(TOKEN_VARIABLE, "")).strip() or None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.post(ask_url(url), content=b"{}", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"cannot reach the server at {url} ({type(exc).__name__}: {exc})",
            hint="start it with `docpilot serve`, or pass the URL it printed",
        ) from None
    if response.status_code != 401:
        return
    if token is None:
        problem = f"the server at {url} requires a bearer token, and {TOKEN_VARIABLE} is not set"
    else:
        problem = f"the server at {url} refused the token in {TOKEN_VARIABLE} (HTTP 401)"
    # `<token>` stands for the value: a placeholder no redaction takes for a secret.
    raise ConfigError(
        problem,
        hint=f"export {TOKEN_VARIABLE}='<token>' with the token the server was started with; "
        "the eval sends it as `Authorization: Bearer <token>`",
    )
