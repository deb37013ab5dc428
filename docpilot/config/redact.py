"""Secrets taken out of any text before it is stored or shown: keys, tokens, URL credentials and query values.

Every module that reports an error passes its text through ``redact`` before cutting
it short, so a secret is never half-shown: a cut made first could keep the start of
a key the patterns below no longer recognise. What is removed:

- the configured key's own value (and the value stripped of padding), whatever its shape;
- key-shaped strings: ``sk-…``, ``tok-…`` and similar prefixed keys, ``Bearer …``
  values, ``api_key=…``/``token: …`` pairs, runs of 32 or more letters and digits
  mixing both, and url-safe runs of 40 or more mixing digits and both cases (the
  shapes of generated keys and tokens);
- in URLs, the user and password (``http://user:pw@host``) and every query value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MARK = "[redacted]"
SECRET_VARIABLES = ("DOCPILOT_API_KEY", "OPENAI_API_KEY", "DOCPILOT_SERVER_TOKEN")
"""Environment variables whose values are secrets wherever they turn up."""

_PREFIXED = re.compile(r"\b(?:sk|pk|rk|tok|key|api|ghp|gho|ghs|xox[abprs])[-_][A-Za-z0-9_\-.*]{6,}", re.IGNORECASE)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9_\-.~+/=]{4,}", re.IGNORECASE)
_PAIR = re.compile(
    r"""(?P<name>\b[\w-]*(?:api[-_]?key|token|secret|password|passwd|auth)[\w-]*)(?P<sep>["']?\s*[:=]\s*["']?)"""
    r"""(?P<value>[^\s"'&,;}]+)""",
    re.IGNORECASE,
)
_LONG = re.compile(
    r"\b(?:(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32,}"  # hex and alphanumeric keys
    r"|(?=[\w-]*\d)(?=[\w-]*[a-z])(?=[\w-]*[A-Z])[\w-]{40,})(?![\w-])"  # url-safe tokens
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@]+@")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\"'<>]+")


def redact(text: str, *secrets: str | None, shapes: bool = True) -> str:
    """``text`` with every secret, key-shaped string, URL credential and URL query value replaced.

    ``shapes=False`` keeps key-shaped strings: for DocPilot's own messages, whose hints
    may spell out how to set a token (``export DOCPILOT_SERVER_TOKEN=...``).
    """
    if not text:
        return text
    for secret in (*secrets, *configured_secrets()):
        for value in {secret, (secret or "").strip()}:
            if value and len(value) >= 4:
                text = text.replace(value, MARK)
    text = _URL.sub(lambda found: redact_url(found.group(0)), text)
    text = _URL_CREDENTIALS.sub(lambda found: f"{found.group('scheme')}{MARK}@", text)
    if not shapes:
        return text
    text = _BEARER.sub(lambda found: f"{found.group(1)} {MARK}", text)
    text = _PAIR.sub(lambda found: f"{found.group('name')}{found.group('sep')}{MARK}", text)
    text = _PREFIXED.sub(MARK, text)
    return _LONG.sub(MARK, text)


def redact_url(url: str) -> str:
    """A URL or path with its user, password and query values replaced (parameter names are kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MARK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MARK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(name, MARK) for name, _ in pairs], safe="[]") if pairs else MARK
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def configured_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret environment variables that are set, longest first."""
    env = os.environ if env is None else env
    values = {env.get(name, "") for name in SECRET_VARIABLES}
    return sorted((v for v in values if v.strip()), key=len, reverse=True)


def redact_data(data: Any) -> Any:
    """JSON-ready data (such as a report's config) with every string passed through ``redact``."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {key: redact_data(value) for key, value in data.items()}
    if isinstance(data, list):
        return [redact_data(value) for value in data]
    return data
