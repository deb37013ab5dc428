"""A docs folder's outline: every page and section id a gold entry can name, with its heading and first words.

``docpilot golden sections`` prints it, so writing a golden set starts from the ids
as they are instead of from guesses that ``golden check`` corrects one at a time.
The text above a page's first heading is listed under its pinning id
``page#(top)`` (``metrics.gold.TOP``): its section id ``page#`` means any section of
the page when written as a gold entry.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from docpilot.corpus.pages import Corpus, Section
from docpilot.errors import InputError
from docpilot.metrics.gold import TOP, is_under

FIRST_WORDS = 12
"""Words of a section's text shown beside its heading."""

_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}).*$", re.M)


@dataclass(frozen=True)
class SectionLine:
    """One section as the outline lists it."""

    id: str
    """The id a gold entry uses to pin this section (``page#(top)`` for the text above the first heading)."""
    heading: str
    """The heading's text; ``(text above the first heading)`` for the preamble."""
    level: int
    """Heading level 1–6; 0 for the text above the first heading."""
    words: str
    """The section's first words, or with ``--grep`` the words around the first match in its text."""


@dataclass(frozen=True)
class PageLine:
    """One page and the sections of it the outline lists."""

    id: str
    """The page id: as a gold entry it matches every section of the page (and of pages nested under it)."""
    title: str
    """The page's title."""
    path: str
    """The file, relative to the docs folder."""
    sections: list[SectionLine] = field(default_factory=list)
    """Its sections in document order (only those matching ``--grep`` when one is given)."""


def outline(corpus: Corpus, page: str | None = None, grep: str | None = None) -> list[PageLine]:
    """The pages under ``page`` (a page id or a folder; None for all) and their sections that mention ``grep``.

    ``grep`` is words that must all appear, in any case, in a section's heading or
    text. A ``page`` that names no page or folder raises an InputError with the
    nearest ids; a grep that matches nothing gives an empty list.
    """
    pages = _pages_under(corpus, page)
    words = grep.lower().split() if grep else []
    found = []
    for page_id in pages:
        entry = corpus.pages[page_id]
        sections = [line for section in entry.sections if (line := _line(section, words)) is not None]
        if sections or not words:
            found.append(PageLine(id=page_id, title=entry.title, path=entry.path, sections=sections))
    return found


def _pages_under(corpus: Corpus, page: str | None) -> list[str]:
    if page is None or not page.strip("/"):
        return list(corpus.pages)
    wanted = page.strip("/")
    for suffix in (".mdx", ".md"):
        wanted = wanted.removesuffix(suffix)
    wanted = wanted.partition("#")[0]  # a section id names its page
    under = [p for p in corpus.pages if is_under(p, wanted)]
    if not under:  # a prefix of a name: `guide/au` for guide/auth and guide/audit
        under = [p for p in corpus.pages if p.startswith(wanted)]
    if under:
        return under
    near = difflib.get_close_matches(wanted, list(corpus.pages), n=3, cutoff=0.5)
    hint = (f"did you mean {', '.join(near)}? " if near else "") + \
        "PAGE is a page id (its path under the docs folder without .md), a folder, or the start of one; " \
        "`docpilot golden sections` with no PAGE lists every page"
    raise InputError(f"no page or folder {page!r} in the docs ({len(corpus.pages)} pages)", path=corpus.root,
                     hint=hint)


def _line(section: Section, words: list[str]) -> SectionLine | None:
    heading = section.title if section.level else "(text above the first heading)"
    pin = section.id if section.level else f"{section.page_id}#{TOP}"
    text = " ".join(_FENCE_LINE.sub(" ", section.text).split())
    if words:
        haystack = f"{section.title} {text}".lower()
        if not all(word in haystack for word in words):
            return None
        return SectionLine(id=pin, heading=heading, level=section.level, words=_excerpt(text, words))
    # Without a search, the prose says best what a section is about; code is a last resort.
    prose = " ".join(without_admonition_titles(_without_code(section.text)).split())
    return SectionLine(id=pin, heading=heading, level=section.level, words=_excerpt(prose or text, words))


def without_admonition_titles(text: str) -> str:
    """The text with the title lines the parser keeps of admonitions (``!!! tip`` → ``Tip``) left out.

    Such a title is a short line with no closing punctuation right above the
    admonition's indented body; joined to it, it reads "Tip Use …".
    """
    lines = text.split("\n")
    kept = []
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        title = (line.strip() and line[0] not in " \t" and len(line.split()) <= 5
                 and not line.rstrip().endswith((".", "!", "?", ":", ",", ";"))
                 and after.startswith(("    ", "\t")) and after.strip())
        if not title:
            kept.append(line)
    return "\n".join(kept)


def _without_code(text: str) -> str:
    """The text with its fenced code blocks left out."""
    kept, fence = [], None
    for line in text.split("\n"):
        opened = _FENCE_LINE.match(line)
        if fence is None and opened:
            fence = line.strip()[:3]
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        else:
            kept.append(line)
    return "\n".join(kept)


def _excerpt(text: str, words: list[str]) -> str:
    """The first words of ``text``, or, when the first grep word is in it, the words around its first place."""
    tokens = text.split()
    start = 0
    if words:
        lowered = [token.lower() for token in tokens]
        start = next((i for i, token in enumerate(lowered) if words[0] in token), 0)
        start = max(start - FIRST_WORDS // 3, 0)
    shown = tokens[start : start + FIRST_WORDS]
    return ("… " if start else "") + " ".join(shown) + (" …" if start + FIRST_WORDS < len(tokens) else "")
