"""Markdown and MDX pages read as plain sections: front matter, headings and text.

A page is read line by line. Code fences are copied as they are (a ``#`` line in a
fence is code, not a heading); HTML and MDX comments, MDX ``import``/``export``
blocks and ``{expressions}`` are dropped; JSX components and HTML tags give way to
the text they wrap; admonition openers keep only their title. What is left is split
at ATX and setext headings into sections, each with its anchor (DESIGN §3).

Pages are untrusted input (a pull request may bring any), so reading one takes time
linear in its length whatever it holds: the line rules here are anchored regexes
with no two quantifiers competing for the same characters, or scans by hand, and
the inline rules (``docpilot.corpus.markup``) are built the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from docpilot.corpus.frontmatter import meta_keywords, meta_text, read_front_matter
from docpilot.corpus.generators import LABEL_CLOSE, LABEL_OPEN, LINK_CLOSE, LINK_OPEN, Targets, may_hold_syntax, rewrite
from docpilot.corpus.markup import plain_inline, reduce_markup

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
# Greedy on purpose: a lazy body with a trailing-space check costs a retry per character.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
# Lines that start a block of their own, so a setext underline below them is a rule.
_OWN_BLOCK = re.compile(r"^[ \t]*(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\||<)")
_CONSTRUCT_STARTS = frozenset("`~#=-*_!?/:ie")
_BLOCK_STARTS = frozenset("-*+>|<0123456789")
_ESM = re.compile(
    r"^(?:import\s+(?:[\"'{*]|[\w$]+\s*(?:,|from\b))"
    r"|export\s+(?:const|let|var|function|default|class|async|\{|\*))"
)
_KIND = re.compile(r"[\w-]*")
_ATTR_TOKEN = re.compile(r"[#.][\w:-]+|[\w:-]+=\S+")

_SLUG_DROP = re.compile(r"[^\w\- ]")
_LINK_MARK = re.compile(f"{LINK_OPEN}([^{LINK_CLOSE}]*){LINK_CLOSE}")
_LABEL_MARK = re.compile(f"{LABEL_OPEN}([^{LABEL_CLOSE}]*){LABEL_CLOSE}")
_BLANK_RUN = re.compile(r"\n(?:[ \t]*\n)+")


@dataclass(frozen=True, slots=True)
class RawSection:
    """One heading and the text under it, before it becomes a corpus section."""

    anchor: str
    """The section's anchor: explicit id, else the slug made unique in the page."""
    title: str
    """Heading text as plain text; '' for the text before the first heading."""
    level: int
    """Heading level 1–6; 0 for the text before the first heading."""
    text: str
    """The section's text with markup reduced; code fences kept as written."""
    links: tuple[str, ...] = ()
    """Page or section ids its cross-references name (``relref``, ``{ref}``, ``{% link %}``), in order."""
    labels: tuple[str, ...] = ()
    """MyST ``(label)=`` targets that name this section."""


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """A page's front matter fields and its sections in document order."""

    title: str | None
    """Front matter ``title``; None when absent or blank."""
    description: str | None
    """Front matter ``description``; None when absent or blank."""
    keywords: tuple[str, ...]
    """Front matter ``keywords``, from a list or a comma-separated string."""
    sections: tuple[RawSection, ...]
    """Sections in order; the first may be the untitled preamble."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Kind of generator construct (``Hugo shortcode``, ``include``, …) → how many went with nothing kept."""
    references: int = 0
    """Cross-references read; resolving them needs the folder's other pages."""


def slugify(text: str) -> str:
    """Return the GitHub-style slug of a heading's plain text."""
    return _SLUG_DROP.sub("", text.lower()).replace(" ", "-")


def parse_page(
    text: str, *, source: str, mdx: bool, page_id: str = "", targets: Targets | None = None
) -> ParsedPage:
    """Read a page's text into front matter and sections.

    ``source`` names the file in error messages; ``mdx`` turns on the MDX rules
    (ESM lines and ``{expressions}`` dropped). Static-site generators' syntax is
    read first (``docpilot.corpus.generators``): ``page_id`` places the page's
    relative cross-references and ``targets`` resolves them into links.
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    meta, start = read_front_matter(lines, source)
    body = lines[start:]
    dropped: dict[str, int] = {}
    references = 0
    if may_hold_syntax(text):
        values = {key: value for key, value in meta.items() if isinstance(key, str) and isinstance(value, str)}
        rewritten = rewrite(body, mdx=mdx, page_id=page_id, targets=targets, values=values)
        body, dropped, references = rewritten.lines, dict(rewritten.dropped), rewritten.references
    return ParsedPage(
        title=meta_text(meta, "title", lines, source),
        description=meta_text(meta, "description", lines, source),
        keywords=meta_keywords(meta, lines, source),
        sections=_cut_sections(body, mdx),
        dropped=dropped,
        references=references,
    )


def split_blocks(text: str) -> list[str]:
    """Split section text into paragraphs at blank lines, keeping each code fence whole."""
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is None:
            opened = _FENCE_OPEN.match(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence = opened.group(1)
            elif not line.strip():
                if current:
                    blocks.append("\n".join(current))
                    current = []
                continue
        elif _closes(line, fence):
            fence = None
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def _cut_sections(lines: list[str], mdx: bool) -> tuple[RawSection, ...]:
    """Walk the page's lines once and cut them into sections at headings.

    One flat loop with local state: this runs for every line of every page, so it
    avoids per-line method calls and tries each construct only when the line's
    first character can open it. A section's text gathers as finished ``parts``
    (reduced prose, verbatim code fences) plus the prose and code still open.
    """
    sections: list[RawSection] = []
    used: dict[str, int] = {}
    head: tuple[str, str, int, tuple[str, ...]] = ("", "", 0, ())  # anchor, title, level, labels of the open section
    parts: list[str] = []
    prose: list[str] = []
    code: list[str] = []
    paragraph = 0  # how many trailing prose lines form an open paragraph (for setext)
    fence: str | None = None
    comment: str | None = None  # the closing token of the comment we are in
    in_esm = False
    previous_blank = True
    for line in lines:
        if fence is not None:
            code.append(line)
            if fence[0] in line and _closes(line, fence):
                parts.append("\n".join(code))
                fence, code = None, []
            continue
        if comment is not None:
            end = line.find(comment)
            if end < 0:
                continue
            line = line[end + len(comment) :]
            comment = None
            if not line.strip():
                continue
        if "<!--" in line or (mdx and "{/*" in line):
            line, comment = _drop_comments(line, mdx)
        stripped = line.lstrip()
        if not stripped:
            in_esm, previous_blank, paragraph = False, True, 0
            prose.append("")
            continue
        if in_esm:
            continue
        first = stripped[0]
        heading: tuple[str, int] | None = None
        if first in _CONSTRUCT_STARTS:
            if first in "ie" and mdx and previous_blank and _ESM.match(line):
                in_esm = True
                continue
            if first in "`~":
                opened = _FENCE_OPEN.match(line)
                if opened and not (first == "`" and "`" in opened.group(2)):
                    if prose:
                        parts.append(_prose_text(prose, mdx))
                        prose = []
                    fence, code = opened.group(1), [line]
                    previous_blank, paragraph = False, 0
                    continue
            elif first == "#":
                atx = _ATX.match(line)
                if atx:
                    heading = (_strip_closing_hashes(atx.group(2) or ""), len(atx.group(1)))
            elif first in "=-" and paragraph and _SETEXT.match(line):
                heading = (" ".join(text.strip() for text in prose[-paragraph:]), 1 if first == "=" else 2)
                del prose[-paragraph:]
            if heading is None and first in "-*_" and _RULE.match(line):
                previous_blank, paragraph = False, 0
                continue
            if heading is None and first in "!?/:":
                title = _admonition_title(line)
                if title is not None:
                    if title:
                        prose.append(title)
                    previous_blank, paragraph = False, 0
                    continue
        previous_blank = False
        if heading is not None:
            _close_section(sections, head, parts, prose, mdx)
            head = _open_section(heading[0], heading[1], used, mdx)
            parts, prose, paragraph = [], [], 0
            continue
        prose.append(line)
        if (first in _BLOCK_STARTS and _OWN_BLOCK.match(line)) or (
            not paragraph and line.startswith(("    ", "\t"))
        ):
            paragraph = 0
        else:
            paragraph += 1
    if code:  # a fence never closed runs to the end of the page
        parts.append("\n".join(code))
    _close_section(sections, head, parts, prose, mdx)
    if not sections:
        sections.append(RawSection(anchor="", title="", level=0, text=""))
    return tuple(sections)


def _strip_closing_hashes(content: str) -> str:
    """Drop an ATX heading's optional closing run of '#' (it must follow a space)."""
    content = content.strip()
    bare = content.rstrip("#")
    if bare == content:
        return content
    if not bare or bare[-1] in " \t":
        return bare.rstrip()
    return content


def _admonition_title(line: str) -> str | None:
    """What an admonition line leaves: an opener its title, else its kind ('Note'); a closer ''.

    None when the line is no admonition. Three syntaxes: MkDocs ``!!! kind "Title"``
    (``???``/``???+`` for collapsible ones), PyMdown blocks ``/// kind | Title``, and
    Docusaurus/MyST ``:::kind[Title]`` or ``:::kind Title``. Read by hand: a regex
    for these lets runs of spaces be split between its parts in every possible way.
    """
    body = line.lstrip(" \t")
    if body.startswith("!!!"):
        return _titled_by_quotes(body[3:])
    if body.startswith("???"):
        return _titled_by_quotes(body[4:] if body.startswith("???+") else body[3:])
    if body.startswith("///"):
        return _titled_after_bar(body.lstrip("/"))
    if body.startswith(":::"):
        return _titled_after_kind(body.lstrip(":"))
    return None


def _titled_by_quotes(rest: str) -> str | None:
    # ' kind', then optionally ' "Title"' as the line's last characters.
    word = rest.lstrip(" \t")
    if word == rest:
        return None
    kind = _KIND.match(word).group()
    if not kind:
        return None
    after = word[len(kind) :]
    title = after.strip(" \t")
    if not title:
        return kind.capitalize()
    if after[0] not in " \t" or len(title) < 2 or title[0] != '"' or title[-1] != '"':
        return None
    return title[1:-1] or kind.capitalize()


def _titled_after_bar(rest: str) -> str | None:
    # An optional kind, then optionally '| Title'.
    word = rest.lstrip(" \t")
    kind = _KIND.match(word).group()
    after = word[len(kind) :].lstrip(" \t")
    if after and after[0] != "|":
        return None
    return after[1:].strip(" \t") or kind.capitalize()


def _titled_after_kind(rest: str) -> str | None:
    # An optional kind, then '[Title]' or ' Title'. A line that is neither but has a space
    # after the colons keeps all that follows it as its title: ':::  {.note}' → '{.note}'.
    word = rest.lstrip(" \t")
    kind = _KIND.match(word).group()
    after = word[len(kind) :]
    if not after.strip(" \t"):
        return kind.capitalize()
    if after[0] == "[":
        title = after.rstrip(" \t")
        if len(title) >= 2 and title[-1] == "]":
            return title[1:-1] or kind.capitalize()
    elif kind and after[0] in " \t":
        return after.strip(" \t")
    if word == rest:
        return None
    return word.rstrip(" \t")


def _drop_comments(line: str, mdx: bool) -> tuple[str, str | None]:
    """Remove HTML (and MDX) comments from a line; return it and the closer still awaited.

    An opener inside a code span (after an odd number of backticks) ends the search.
    The line is rebuilt once and the backticks counted as it goes: a line of many
    comments would otherwise be copied and counted again for each one.
    """
    openers = (("<!--", "-->"), ("{/*", "*/}")) if mdx else (("<!--", "-->"),)
    for opener, closer in openers:
        start = line.find(opener)
        if start < 0:
            continue
        kept: list[str] = []
        backticks = 0
        done = 0
        while start >= 0:
            backticks += line.count("`", done, start)
            if backticks % 2:
                break
            kept.append(line[done:start])
            end = line.find(closer, start + len(opener))
            if end < 0:
                return "".join(kept), closer
            done = end + len(closer)
            start = line.find(opener, done)
        kept.append(line[done:])
        line = "".join(kept)
    return line, None


def _open_section(
    raw_heading: str, level: int, used: dict[str, int], mdx: bool
) -> tuple[str, str, int, tuple[str, ...]]:
    labels: tuple[str, ...] = ()
    if LABEL_OPEN in raw_heading or LINK_OPEN in raw_heading:
        labels = tuple(_LABEL_MARK.findall(raw_heading))
        raw_heading = _LINK_MARK.sub("", _LABEL_MARK.sub("", raw_heading))
    explicit, raw_heading = _explicit_id(raw_heading)
    title = plain_inline(raw_heading, mdx=mdx)
    # github-slugger's rule: the first repeat of "x" becomes "x-1", then "x-2", ...
    base = candidate = explicit or slugify(title) or "section"
    while candidate in used:
        used[base] += 1
        candidate = f"{base}-{used[base]}"
    used[candidate] = 0
    return candidate, title, level, labels


def _close_section(
    sections: list[RawSection], head: tuple[str, str, int, tuple[str, ...]], parts: list[str], prose: list[str],
    mdx: bool,
) -> None:
    if prose:
        parts.append(_prose_text(prose, mdx))
    text = "\n".join(part for part in parts if part).strip("\n")
    links: tuple[str, ...] = ()
    if LINK_OPEN in text:
        links = tuple(dict.fromkeys(_LINK_MARK.findall(text)))
        text = _LINK_MARK.sub("", text)
    anchor, title, level, labels = head
    # The untitled preamble exists only when it holds text.
    if level or text:
        sections.append(RawSection(anchor=anchor, title=title, level=level, text=text, links=links, labels=labels))


def _explicit_id(heading: str) -> tuple[str | None, str]:
    """A heading's ``{ #id .class key=value }`` attribute list: the id it gives, and the heading without it."""
    found = _attr_list(heading)
    if found is None:
        return None, heading
    start, inside = found
    tokens = inside.split()
    if not tokens or not all(_ATTR_TOKEN.fullmatch(token) for token in tokens):
        return None, heading
    ids = [token[1:] for token in tokens if token.startswith("#")]
    return (ids[0] if ids else None), heading[:start]


def _attr_list(heading: str) -> tuple[int, str] | None:
    """Where a heading's closing ``{ ... }`` starts (with the blanks before it), and what it holds.

    By hand: a regex searching for it tries every start, and splits a run of spaces
    between its parts in every way (a heading of 400 spaces after an unclosed '{'
    took 14 s). The list is the last '{' of the heading, its '}' the last character
    but blanks, with no brace between.
    """
    body = heading.rstrip(" \t")
    if not body.endswith("}"):
        return None
    opened = body.rfind("{")
    if opened < 0 or "}" in body[opened + 1 : -1]:
        return None
    return len(body[:opened].rstrip(" \t")), body[opened + 1 : -1].strip(" \t")


def _prose_text(lines: list[str], mdx: bool) -> str:
    """Prose lines as text: markup reduced, blank runs cut to one, one blank kept at each edge."""
    text = "\n".join(lines)
    text = reduce_markup(text, mdx=mdx, keep_attrs=True, inline=False)
    if " \n" in text or "\t\n" in text or text.endswith((" ", "\t")):
        # Line by line: a regex for trailing blanks restarts at every blank of a long run.
        text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    if not text.strip():
        return ""
    text = _BLANK_RUN.sub("\n\n", text)
    # One blank line is kept at each edge: it parts this prose from a code fence beside it.
    if text.startswith("\n"):
        text = "\n" + text.lstrip("\n")
    if text.endswith("\n"):
        text = text.rstrip("\n") + "\n"
    return text
