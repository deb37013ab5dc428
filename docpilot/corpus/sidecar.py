"""The files beside the pages: ``vocabulary.json`` (user words → doc words) and ``llms.txt``.

``llms.txt`` follows llmstxt.org: a title, a summary, and lists of links with a
description each; the descriptions become page descriptions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docpilot.errors import CorpusError

_LLMS_LINK = re.compile(
    r"^[ \t]*[-*+][ \t]+\[([^\]]*)\]\(<?([^()\s<>]*)>?(?:[ \t]+\"[^\"]*\")?\)(?:[ \t]*:[ \t]*(.*))?$"
)
_URL_ORIGIN = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/]*")


def parse_vocabulary(text: str, path: Path) -> dict[str, list[str]]:
    """User word → doc words from the text of a `vocabulary.json` file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"not valid JSON: {exc.msg}",
            path=path,
            line=exc.lineno,
            hint='write an object such as {"login": ["authentication", "sign in"]}',
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CorpusError(
            f"cannot be read as JSON: {exc}",
            path=path,
            hint='write an object such as {"login": ["authentication", "sign in"]}',
        ) from None
    if not isinstance(data, dict):
        raise CorpusError(
            f"must be a JSON object mapping words to doc words, not {type(data).__name__}",
            path=path,
            line=1,
            hint='write an object such as {"login": ["authentication", "sign in"]}',
        )
    vocabulary: dict[str, list[str]] = {}
    for word, targets in data.items():
        if isinstance(targets, str):
            targets = [targets]
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise CorpusError(
                f"the value of {word!r} must be a string or a list of strings",
                path=path,
                line=_key_line(text, word),
                hint=f'write it as "{word}": ["doc word", "another"]',
            )
        vocabulary[word] = list(targets)
    return vocabulary


def _key_line(text: str, key: str) -> int | None:
    at = text.find(json.dumps(key))
    if at < 0:
        at = text.find(json.dumps(key, ensure_ascii=False))
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def parse_llms(text: str, page_ids: set[str]) -> dict[str, str]:
    """Page id → description for each link in ``llms.txt`` that names a page of the corpus."""
    descriptions: dict[str, str] = {}
    depth = max((page_id.count("/") + 1 for page_id in page_ids), default=0)
    for line in text.split("\n"):
        link = _LLMS_LINK.match(line.rstrip())
        if not link or not (link.group(3) or "").strip():
            continue
        page_id = _llms_page_id(link.group(2), page_ids, depth)
        if page_id is not None and page_id not in descriptions:
            descriptions[page_id] = link.group(3).strip()
    return descriptions


def _llms_page_id(url: str, page_ids: set[str], depth: int) -> str | None:
    path = _URL_ORIGIN.sub("", url).split("#", 1)[0].split("?", 1)[0].strip("/")
    for suffix in (".md", ".mdx", ".html"):
        path = path.removesuffix(suffix)
    path = path.rstrip("/")
    if path in ("", "index"):
        return "index" if "index" in page_ids else None
    path = path.removesuffix("/index")
    parts = path.split("/")
    # The link may carry the site's base path (/docs/...); drop leading parts until a page matches.
    # No page id has more than ``depth`` parts, so longer tails are not tried: a link of many
    # thousand parts would otherwise join each of its tails in turn.
    for start in range(max(0, len(parts) - depth), len(parts)):
        candidate = "/".join(parts[start:])
        if candidate in page_ids:
            return candidate
    return None
