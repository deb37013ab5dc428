"""Checks that keep other web sites out of a local server, and secrets out of its access log.

A server on a loopback address, and above all one started with ``--no-auth``, trusts
whoever can reach it, and a web page in the user's browser can reach it too: a
``text/plain`` POST needs no CORS preflight, and DNS rebinding lets a foreign name
point at 127.0.0.1 and read the reply. So on loopback the ``Host`` header must name
this machine, an ``Origin`` header (sent by browsers) must be a loopback origin, and
on every address ``/v1/ask`` takes ``application/json`` only, which no page can send
cross-site without a preflight this server never grants.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from starlette.requests import Request

from docpilot.redact import redact_url
from docpilot.server.auth import is_loopback

_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^:\[\]]+)(?::\d{1,5})?$")


def host_is_local(host_header: str, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether a ``Host`` header (name and optional port) names this machine, or a name in ``allowed``."""
    found = _HOST.match(host_header.strip())
    return bool(found) and (is_loopback(found.group(1)) or found.group(1).lower() in allowed)


def origin_is_local(origin: str, allowed: frozenset[str] = frozenset()) -> bool:
    """Whether an ``Origin`` header is a page served from this machine, or from a name in ``allowed``."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    name = parts.hostname
    return parts.scheme in ("http", "https") and name is not None and (is_loopback(name) or name in allowed)


def foreign_request(request: Request, allowed: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """Why a request to a loopback server comes from elsewhere, as (code, message); None when it does not.

    ``allowed`` adds host names (lower case) a reverse proxy in front of the server forwards.
    """
    host = request.headers.get("host", "")
    if not host_is_local(host, allowed):
        return "host_not_allowed", (
            f"this server answers only to localhost names, not Host {host[:80]!r}; "
            "a reverse proxy's name is added with `docpilot serve --allow-host NAME`"
        )
    origin = request.headers.get("origin")
    if origin is not None and origin != "null" and not origin_is_local(origin, allowed):
        return "origin_not_allowed", f"requests from pages on {origin[:80]!r} are not allowed"
    if origin == "null":
        return "origin_not_allowed", "requests from sandboxed pages (Origin: null) are not allowed"
    return None


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON (``application/json``, any parameters)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json"


class AccessLogRedactor(logging.Filter):
    """Replaces the values of query parameters in uvicorn's access lines, so a token sent there is never logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn's access line: (client, method, path with query, HTTP version, status).
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_url(args[2]), *args[3:])
        return True
