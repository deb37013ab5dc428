"""A page's YAML front matter: the `---` block at its top, and the title, description and
keywords it gives. A broken block is an error naming the file and the line."""

from __future__ import annotations

from typing import Any

import yaml

from docpilot.errors import CorpusError
from docpilot.userfiles.userfile import check_aliases

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_front_matter(lines: list[str], source: str) -> tuple[dict[str, Any], int]:
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise CorpusError(
            "front matter opened with '---' is never closed",
            path=source,
            line=1,
            hint="end the front matter with a line holding only '---'",
        )
    block = "\n".join(lines[1:end])
    loader = None
    try:
        loader = _YAML_LOADER(block)
        root = loader.get_single_node()
        if root is not None:
            check_aliases(root, source, CorpusError)  # a page in a pull request may hold an alias bomb too
        meta = loader.construct_document(root) if root is not None else None
    except CorpusError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 1
        raise CorpusError(
            f"front matter is not valid YAML: {exc.problem or exc}",
            path=source,
            line=min(line, end),
            hint="fix the YAML between the two '---' lines (quote values holding ':' or '#')",
        ) from None
    except Exception as exc:  # noqa: BLE001 - YAML raises many types (dates, recursion); all mean bad input
        raise CorpusError(
            f"front matter cannot be read: {exc}",
            path=source,
            line=1,
            hint="fix the YAML between the two '---' lines",
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CorpusError(
            f"front matter must be a mapping of keys to values, not {type(meta).__name__}",
            path=source,
            line=2,
            hint="write it as 'key: value' lines, such as 'title: My page'",
        )
    return meta, end + 1


def meta_text(meta: dict[str, Any], key: str, lines: list[str], source: str) -> str | None:
    value = meta.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int, float)):
        if value is None:
            return None
        raise CorpusError(
            f"front matter {key!r} must be text, not {type(value).__name__}",
            path=source,
            line=_meta_line(lines, key),
            hint=f"write it as '{key}: some text'",
        )
    return str(value).strip() or None


def meta_keywords(meta: dict[str, Any], lines: list[str], source: str) -> tuple[str, ...]:
    value = meta.get("keywords")
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if isinstance(value, list) and all(isinstance(word, (str, int, float)) for word in value):
        return tuple(str(word).strip() for word in value if str(word).strip())
    raise CorpusError(
        "front matter 'keywords' must be a list of words or a comma-separated string",
        path=source,
        line=_meta_line(lines, "keywords"),
        hint="write it as 'keywords: [flow, task]' or 'keywords: flow, task'",
    )


def _meta_line(lines: list[str], key: str) -> int | None:
    return next((i + 1 for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
