"""Who may ask the server questions: a bearer token, or nobody but this machine.

The token comes from ``DOCPILOT_SERVER_TOKEN`` and nowhere else, so it never sits in
a config file, a report or a log. A server runs without one only when it listens on
a loopback address and was started with ``--no-auth`` on purpose; anything reachable
from the network needs the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse

from docpilot.api.schema import TOKEN_VARIABLE, ErrorBody, ErrorEvent
from docpilot.errors import ConfigError

__all__ = ["TOKEN_VARIABLE", "BearerAuth", "is_loopback", "server_token"]
_REALM = 'Bearer realm="docpilot"'


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1 or localhost); unknown names are not."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name could resolve anywhere; treat it as reachable


def server_token(host: str, *, no_auth: bool, env: Mapping[str, str] | None = None) -> str | None:
    """The token the server will require, or None when it may run open; raises ConfigError otherwise.

    Open is allowed only on a loopback host with ``no_auth``. With auth on, the token
    must be set, so a server never starts believing it is protected when it is not.
    """
    env = os.environ if env is None else env
    if no_auth:
        if not is_loopback(host):
            raise ConfigError(
                f"--no-auth is refused on host {host!r}: it is reachable from other machines, "
                "and anyone who can reach it could use the model",
                hint=f"serve on 127.0.0.1 with --no-auth, or set {TOKEN_VARIABLE} and drop --no-auth",
            )
        return None
    token = env.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise ConfigError(
            f"the server needs a bearer token and {TOKEN_VARIABLE} is not set",
            hint=f'export {TOKEN_VARIABLE}="$(python -c \'import secrets; print(secrets.token_urlsafe(32))\')" '
            "and send it as `Authorization: Bearer <token>`; or, on 127.0.0.1 only, pass --no-auth",
        )
    return token


class BearerAuth:
    """Checks a request's ``Authorization: Bearer`` header against the server's token."""

    def __init__(self, token: str | None) -> None:
        self._token = _digest(token) if token else None

    @property
    def enabled(self) -> bool:
        """Whether a token is required."""
        return self._token is not None

    def __repr__(self) -> str:
        return f"BearerAuth(enabled={self.enabled})"

    def denial(self, request: Request, request_id: str) -> JSONResponse | None:
        """A 401 response when the request may not pass; None when it may."""
        if self._token is None:
            return None
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return _unauthorized("send `Authorization: Bearer <token>`", _REALM, request_id)
        # Digests have one length, and compare_digest takes the same time wherever they differ,
        # so the answer's timing tells nothing about the token's length or its prefix.
        if not hmac.compare_digest(_digest(value.strip()), self._token):
            return _unauthorized("the bearer token is not valid", f'{_REALM}, error="invalid_token"', request_id)
        return None


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _unauthorized(message: str, challenge: str, request_id: str) -> JSONResponse:
    body = ErrorBody(error=ErrorEvent(code="unauthorized", message=message, request_id=request_id))
    return JSONResponse(
        body.model_dump(),
        status_code=401,
        headers={"WWW-Authenticate": challenge, "X-Request-Id": request_id},
    )
