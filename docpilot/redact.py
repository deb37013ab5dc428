"""Secrets taken out of what is stored or shown, and only secrets: ids, paths and digests stay.

Redaction looks only where a secret can be, so that a page id such as
``guide/api-reference#auth``, a docs folder named ``tok_examples`` or a SHA-256
fingerprint reaches the report as written.

In a report's configuration (``redact_config``): the user and password of a URL,
every URL query value, and any field named like a secret (the loader refuses those,
so this is a second line of defence). Nothing else in the configuration is touched.

In free text, such as a row's error or a service's message (``redact``):

- the configured key's own value (and the value stripped of padding), whatever its
  shape: ``DOCPILOT_API_KEY``, ``OPENAI_API_KEY``, ``DOCPILOT_SERVER_TOKEN``;
- URL credentials and query values, as in the configuration;
- key-shaped strings. A string is key-shaped when it looks generated, not written:
  a service's own key prefix (``ghp_``, ``glpat-``, ``xoxb-``) and what follows; a
  prefix that also starts words (``sk-``, ``tok-``, ``api-``, ``key-``) followed by a
  part of 8 or more characters mixing letters and digits (``api-reference``,
  ``tok_examples`` and ``key-concepts`` are names, ``sk-proj-4fQ9…`` is not); the value
  after ``Bearer``/``Basic``/``Token`` when it is not a plain word or number; the value
  of a pair whose name ends in a secret's name (``api_key=…``, ``token: …``,
  ``Authorization: …``, but not ``max_tokens=…``); a run of 32 or more letters and
  digits mixing both; a url-safe run of 40 or more mixing digits and both cases.
  Two shapes are kept on purpose: a run of hex digits as long as a digest (32, 40,
  56, 64, 96 or 128: MD5 to SHA-512), because fingerprints are hex digests; and a
  mixed-case run made of whole words (``ReadTheDocsConfigurationV2Example``), because
  identifiers are.
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

DIGEST_LENGTHS = frozenset({32, 40, 56, 64, 96, 128})
"""Lengths in hex digits of MD5, SHA-1, SHA-224, SHA-256, SHA-384 and SHA-512: such runs are fingerprints."""

_SECRET_WORD = (
    r"(?:api[-_]?key|apikey|access[-_]?key|secret[-_]?key|private[-_]?key|client[-_]?secret"
    r"|token|secret|password|passwd|pwd|auth|authorization|credentials?)"
)
# A secret's name is a word ending in one of the secret words; `/`, `#` or `.` before it
# make it part of a path or an id (`guide/auth: …`), which is no name.
_SECRET_NAME = re.compile(rf"(?:[\w-]*[-_])?{_SECRET_WORD}", re.IGNORECASE)
_PAIR = re.compile(
    rf"""(?<![\w/#.-])(?P<name>(?:[\w-]*[-_])?{_SECRET_WORD})(?![\w-])(?P<sep>["']?\s*[:=]\s*["']?)"""
    r"""(?P<value>(?:(?:Bearer|Basic|Token)\s+)?[^\s"'&,;}]+)""",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"\b(?P<scheme>Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9_\-.~+/=]{6,})", re.IGNORECASE)
_PLAIN = re.compile(r"[A-Z]?[a-z]+|\d+")  # a word or a number, which no scheme's credential is
# Prefixes that start words too (`api-reference`, `key-concepts`) take a generated tail;
# the services' own prefixes (GitHub, GitLab, Slack) start nothing else.
_PREFIXED = re.compile(
    r"\b(?:(?P<own>ghp|gho|ghs|ghu|ghr|github_pat|glpat|xox[abprs])|sk|pk|rk|tok|key|api)[-_]"
    r"(?P<tail>[A-Za-z0-9_\-.*]{6,})",
    re.IGNORECASE,
)
_RUN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")
_HEX = re.compile(r"[0-9a-fA-F]+")
_PIECE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORDY = 4.0
"""Mean piece length from which a mixed-case run reads as words: generated keys average under 2."""
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
    text = _PAIR.sub(_redact_pair, text)
    text = _SCHEME.sub(_redact_scheme, text)
    text = _PREFIXED.sub(_redact_prefixed, text)
    return _RUN.sub(lambda found: MARK if _generated_run(found.group(0)) else found.group(0), text)


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


def redact_config(data: Any, *, queries: bool = True) -> Any:
    """JSON-ready configuration with URL credentials, URL query values and secret-named fields replaced.

    Every other value (page names, paths, ids, digests) is kept as it is.
    ``queries=False`` keeps query values: for a fingerprint, which must move when one
    does (an ``api-version`` is a setting) but must never carry a password.
    """
    if isinstance(data, str):
        return _URL.sub(lambda found: _redact_config_url(found.group(0), queries=queries), data)
    if isinstance(data, dict):
        return {key: MARK if _is_secret_name(key) and data[key] not in (None, "")
                else redact_config(value, queries=queries) for key, value in data.items()}
    if isinstance(data, list):
        return [redact_config(value, queries=queries) for value in data]
    return data


def _redact_config_url(url: str, *, queries: bool) -> str:
    if queries:
        return redact_url(url)
    return _URL_CREDENTIALS.sub(lambda found: f"{found.group('scheme')}{MARK}@", url)


def _is_secret_name(key: object) -> bool:
    return isinstance(key, str) and _SECRET_NAME.fullmatch(key) is not None


def _redact_pair(found: re.Match[str]) -> str:
    if found.group("value") == MARK:
        return found.group(0)
    return f"{found.group('name')}{found.group('sep')}{MARK}"


def _redact_scheme(found: re.Match[str]) -> str:
    value = found.group("value")
    if value == MARK or _PLAIN.fullmatch(value):
        return found.group(0)  # "Token budget", "Basic authentication": prose, not a header
    return f"{found.group('scheme')} {MARK}"


def _redact_prefixed(found: re.Match[str]) -> str:
    tail = found.group("tail")
    if (found.group("own") and len(tail) >= 10) or _generated_tail(tail):
        return MARK
    return found.group(0)


def _mixes_letters_and_digits(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _generated_tail(tail: str) -> bool:
    """Whether what follows a key prefix was generated: a long part mixing letters and digits, or a mask."""
    if "**" in tail:
        return True  # a key a service shows masked, such as sk-proj-****abcd
    return any(len(part) >= 8 and _mixes_letters_and_digits(part) for part in re.split(r"[-_.]", tail))


def _wordy(run: str) -> bool:
    """Whether a mixed-case run reads as words (an identifier) rather than as random characters."""
    pieces = _PIECE.findall(run)
    return bool(pieces) and sum(map(len, pieces)) / len(pieces) >= _WORDY


def _generated_alnum(part: str) -> bool:
    if not _mixes_letters_and_digits(part):
        return False
    if _HEX.fullmatch(part):
        return len(part) not in DIGEST_LENGTHS
    mixed_case = any(c.islower() for c in part) and any(c.isupper() for c in part)
    return not (mixed_case and _wordy(part))


def _generated_run(run: str) -> bool:
    """Whether a run of url-safe characters (32 or more) is a generated key or token."""
    if any(len(part) >= 32 and _generated_alnum(part) for part in re.split(r"[-_]", run)):
        return True
    return (len(run) >= 40 and any(c.isdigit() for c in run) and any(c.islower() for c in run)
            and any(c.isupper() for c in run) and not _wordy(run))
