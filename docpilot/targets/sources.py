"""What a target's returned source names in the docs: a section, a page, or nothing the docs hold.

A source arrives as the reply gives it — a URL, a file path, an id, or an object — and
``source_name`` reads it by the mapping (``reply.source_id`` for the URL or path,
``source_ids.heading`` for a heading text). ``SourceResolver.resolve`` then places it
against the docs the run reads:

    section   ``page#anchor`` of a section the docs have: named by its anchor, or by its
              heading text on that page (plain text compared, explicit ``{ #id }``
              attributes and Markdown emphasis dropped; a heading path given as a list
              picks among repeated headings, else the first in page order); with a
              heading mapping, a source under no heading is the page's opening text,
              ``page#``, when the page has one
    page      the bare page id ``page``: the source names a page and no section of it
    outside   what the docs do not hold: a page that is not in the docs folder, or an
              anchor or heading the page lacks; the id is kept as mapped, for the row

A page-level source is stored as the page id with no ``#``: the ranking then says what
the target named, and the retrieval metrics read such a run at page level
(``docpilot.metrics.retrieval.as_read``). The same resolver serves ``golden check --target`` and the
run, so what the check accepts the run accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import jmespath

from docpilot.config.target import SourceMapping
from docpilot.corpus.markdown import slugify
from docpilot.corpus.pages import Corpus, Section

__all__ = ["Resolved", "SourceName", "SourceResolver", "section_id", "source_name"]

Level = Literal["section", "page", "outside"]

_ATTRIBUTES = re.compile(r"\{\s*[#.][^{}]*\}\s*$")
_MARKUP = re.compile(r"[`*_~]|<[^>]+>|\[([^\]]*)\]\([^)]*\)")


@dataclass(frozen=True, slots=True)
class SourceName:
    """One returned source as the mapping reads it, before the docs are asked."""

    mapped: str
    """``page#anchor`` by ``source_ids`` (``page#`` when the source names no anchor)."""
    given: str
    """The source as the reply wrote it (a URL, a path, an id), for the reader's link."""
    heading: tuple[str, ...] = ()
    """Heading texts read by ``source_ids.heading``, outermost first; empty when unset or absent."""
    by_heading: bool = False
    """Whether the mapping reads headings: then a source under none is the text above the page's first."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where one source lands in the docs."""

    id: str
    """A section id, a bare page id (page level), or the mapped id when the docs lack it."""
    level: Level
    """``section``, ``page`` or ``outside``."""


def section_id(source: Any, mapping: SourceMapping) -> str | None:
    """The ``page#anchor`` one returned source (a URL, a path or an id) maps to; None when it names nothing.

    The base URL (else a URL's scheme and host) and the prefix are stripped, then a
    suffix (``.html``, ``.md``, ``/``) and a trailing index page: the rest is the page
    id. A ``#anchor`` is the section; without one the id ends in a bare ``#``.
    """
    if source is None or isinstance(source, (dict, list, bool)):
        return None
    text = str(source).strip()
    if not text:
        return None
    if mapping.base_url and text.startswith(mapping.base_url):
        text = text[len(mapping.base_url):]
    elif "://" in text:
        parts = urlsplit(text)
        text = parts.path + (f"#{parts.fragment}" if parts.fragment else "")
    page, _, anchor = text.partition("#")
    page = unquote(page.split("?", 1)[0]).lstrip("/")
    prefix = mapping.prefix.lstrip("/")
    if prefix and page.startswith(prefix):
        page = page[len(prefix):]
    for suffix in mapping.suffixes:
        if page.endswith(suffix):
            page = page[: -len(suffix)]
            break
    page = page.strip("/")
    if page == mapping.index:
        page = ""
    elif page.endswith("/" + mapping.index):
        page = page[: -len(mapping.index) - 1]
    return f"{page or mapping.index}#{anchor}"


def source_name(item: Any, source_path: str, mapping: SourceMapping) -> SourceName | None:
    """Read one returned source by the mapping; None when it gives no URL, path or id at all."""
    found = jmespath.search(source_path, item)
    mapped = section_id(found, mapping)
    if mapped is None:
        return None
    heading: tuple[str, ...] = ()
    if mapping.heading is not None:
        value = jmespath.search(mapping.heading, item)
        parts = value if isinstance(value, list) else [value]
        heading = tuple(str(p).strip() for p in parts if isinstance(p, (str, int, float)) and str(p).strip())
    return SourceName(mapped=mapped, given=str(found).strip(), heading=heading, by_heading=mapping.heading is not None)


def _plain(text: str) -> str:
    """A heading as compared: explicit attributes, emphasis, code ticks and link targets dropped, spaces folded."""
    text = _ATTRIBUTES.sub("", text)
    text = _MARKUP.sub(lambda m: m.group(1) or "", text)
    return " ".join(text.split()).casefold()


class SourceResolver:
    """Resolves returned sources against one corpus: sections by anchor or heading, pages, and what it lacks."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._headings: dict[str, dict[str, list[Section]]] = {}

    def resolve(self, name: SourceName) -> Resolved:
        """Where ``name`` lands: a section of the docs, a page of them, or outside them."""
        page, _, anchor = name.mapped.partition("#")
        if page not in self.corpus.pages:
            return Resolved(name.mapped, "outside")
        if name.by_heading and not name.heading and not anchor and name.mapped in self.corpus.sections:
            return Resolved(name.mapped, "section")  # no heading above it: the text before the first one
        if name.heading:
            section = self._by_heading(page, name.heading)
            if section is not None:
                return Resolved(section.id, "section")
            return Resolved(f"{page}#{slugify(name.heading[-1])}", "outside")
        if not anchor:
            return Resolved(page, "page")
        if name.mapped in self.corpus.sections:
            return Resolved(name.mapped, "section")
        return Resolved(name.mapped, "outside")

    def _by_heading(self, page: str, path: tuple[str, ...]) -> Section | None:
        titled = self._headings.get(page)
        if titled is None:
            titled = {}
            for section in self.corpus.pages[page].sections:
                if section.level:
                    titled.setdefault(_plain(section.title), []).append(section)
            self._headings[page] = titled
        found = titled.get(_plain(path[-1]), [])
        if len(found) > 1 and len(path) > 1:
            above = [_plain(p) for p in path[:-1]]
            narrowed = [s for s in found if [_plain(h) for h in s.heading_path[-len(path):-1]] == above]
            found = narrowed or found
        return found[0] if found else None
