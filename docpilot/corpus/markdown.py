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

    This runs for every line of every page, so each line is tried for a construct
    only when its first character can open it (``_SectionCutter``).
    """
    cut = _SectionCutter(mdx)
    take = cut.take
    for line in lines:
        take(line)
    return cut.finish()


class _SectionCutter:
    """The state of one walk over a page's lines: the sections cut so far and the one still open.

    A section's text gathers as finished ``parts`` (reduced prose, verbatim code
    fences) plus the prose and code still open.
    """

    __slots__ = (
        "mdx", "sections", "used", "head", "parts", "prose", "code", "paragraph", "fence", "comment", "in_esm",
        "previous_blank",
    )

    def __init__(self, mdx: bool) -> None:
        self.mdx = mdx
        self.sections: list[RawSection] = []
        self.used: dict[str, int] = {}
        self.head: tuple[str, str, int, tuple[str, ...]] = ("", "", 0, ())  # anchor, title, level, labels
        self.parts: list[str] = []
        self.prose: list[str] = []
        self.code: list[str] = []
        self.paragraph = 0  # how many trailing prose lines form an open paragraph (for setext)
        self.fence: str | None = None
        self.comment: str | None = None  # the closing token of the comment we are in
        self.in_esm = False
        self.previous_blank = True

    def take(self, line: str) -> None:
        """Read the page's next line into the open section, or open a new one at a heading."""
        if self.fence is not None:
            self._code_line(line)
            return
        if self.comment is not None:
            line = self._after_comment(line)
            if line is None:
                return
        if "<!--" in line or (self.mdx and "{/*" in line):
            line, self.comment = _drop_comments(line, self.mdx)
        stripped = line.lstrip()
        if not stripped:
            self.in_esm, self.previous_blank, self.paragraph = False, True, 0
            self.prose.append("")
            return
        if self.in_esm:
            return
        first = stripped[0]
        if first in _CONSTRUCT_STARTS and self._construct(line, first):
            return
        self._prose_line(line, first)

    def finish(self) -> tuple[RawSection, ...]:
        """Close the last section and return them all; a page of nothing is one empty section."""
        if self.code:  # a fence never closed runs to the end of the page
            self.parts.append("\n".join(self.code))
        _close_section(self.sections, self.head, self.parts, self.prose, self.mdx)
        if not self.sections:
            self.sections.append(RawSection(anchor="", title="", level=0, text=""))
        return tuple(self.sections)

    def _code_line(self, line: str) -> None:
        """Keep a line of an open code fence as written; a closing fence finishes it as one part."""
        self.code.append(line)
        if self.fence[0] in line and _closes(line, self.fence):
            self.parts.append("\n".join(self.code))
            self.fence, self.code = None, []

    def _after_comment(self, line: str) -> str | None:
        """What follows the end of the open comment on this line; None while it goes on, or when only blanks follow."""
        end = line.find(self.comment)
        if end < 0:
            return None
        line = line[end + len(self.comment) :]
        self.comment = None
        return line if line.strip() else None

    def _construct(self, line: str, first: str) -> bool:
        """Read a line whose first character may open a construct; False when it is prose after all."""
        if first in "ie":
            # MDX's import and export blocks begin only after a blank line, where prose cannot go on.
            if self.mdx and self.previous_blank and _ESM.match(line):
                self.in_esm = True
                return True
            return False
        if first in "`~":
            return self._open_fence(line, first)
        heading = self._heading(line, first)
        if heading is not None:
            self._start_section(*heading)
            return True
        if first in "-*_" and _RULE.match(line):
            self.previous_blank, self.paragraph = False, 0
            return True
        if first in "!?/:":
            return self._admonition(line)
        return False

    def _open_fence(self, line: str, first: str) -> bool:
        """Open a code fence at this line, finishing the prose before it; False when the line opens none."""
        opened = _FENCE_OPEN.match(line)
        # A backtick in the info string of a backtick fence makes the line inline code instead.
        if not opened or (first == "`" and "`" in opened.group(2)):
            return False
        if self.prose:
            self.parts.append(_prose_text(self.prose, self.mdx))
            self.prose = []
        self.fence, self.code = opened.group(1), [line]
        self.previous_blank, self.paragraph = False, 0
        return True

    def _heading(self, line: str, first: str) -> tuple[str, int] | None:
        """The raw text and level of an ATX heading, or of a setext one this line underlines; None for neither."""
        if first == "#":
            atx = _ATX.match(line)
            if atx:
                return _strip_closing_hashes(atx.group(2) or ""), len(atx.group(1))
            return None
        if first in "=-" and self.paragraph and _SETEXT.match(line):
            # The open paragraph's lines are the heading's text, so they leave the prose.
            title = " ".join(text.strip() for text in self.prose[-self.paragraph :])
            del self.prose[-self.paragraph :]
            return title, 1 if first == "=" else 2
        return None

    def _start_section(self, raw_heading: str, level: int) -> None:
        """Close the open section and open the one this heading starts."""
        self.previous_blank = False
        _close_section(self.sections, self.head, self.parts, self.prose, self.mdx)
        self.head = _open_section(raw_heading, level, self.used, self.mdx)
        self.parts, self.prose, self.paragraph = [], [], 0

    def _admonition(self, line: str) -> bool:
        """Keep only an admonition line's title as prose; False when the line is no admonition."""
        title = _admonition_title(line)
        if title is None:
            return False
        if title:
            self.prose.append(title)
        self.previous_blank, self.paragraph = False, 0
        return True

    def _prose_line(self, line: str, first: str) -> None:
        """Add a line of prose, counting it into the open paragraph a setext underline may turn into a heading."""
        self.previous_blank = False
        self.prose.append(line)
        # A list item, quote, table row or tag is a block of its own, and an indented line
        # with no paragraph open is code: neither is a paragraph that an underline makes a heading.
        if (first in _BLOCK_STARTS and _OWN_BLOCK.match(line)) or (
            not self.paragraph and line.startswith(("    ", "\t"))
        ):
            self.paragraph = 0
        else:
            self.paragraph += 1


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
    between its parts in every way, so a heading of many spaces after an unclosed '{'
    would take time far beyond its length. The list is the last '{' of the heading, its
    '}' the last character but blanks, with no brace between.
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
