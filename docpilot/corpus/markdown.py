"""Markdown and MDX pages read as plain sections: front matter, headings and text.

A page is read line by line. Code fences are copied as they are (a ``#`` line in a
fence is code, not a heading); HTML and MDX comments, MDX ``import``/``export``
blocks and ``{expressions}`` are dropped; JSX components and HTML tags give way to
the text they wrap; admonition openers keep only their title. What is left is split
at ATX and setext headings into sections, each with its anchor (DESIGN §3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docpilot.corpus.frontmatter import meta_keywords, meta_text, read_front_matter

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
_ADMONITION = re.compile(
    r'^[ \t]*(?:(?:!!!|\?\?\?\+?)[ \t]+([\w-]+)(?:[ \t]+"(.*)")?'
    r"|/{3,}[ \t]*([\w-]+)?(?:[ \t]*\|[ \t]*(.*?))?"
    r"|:{3,}[ \t]*([\w-]+)?(?:\[(.*?)\]|[ \t]+(.*?))?)[ \t]*$"
)
_ATTR_LIST = re.compile(r"[ \t]*\{[ \t]*([^{}]*?)[ \t]*\}[ \t]*$")
_ATTR_TOKEN = re.compile(r"[#.][\w:-]+|[\w:-]+=\S+")

_ATTRS = (
    r"""(?:\s+[\w:.-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|\{(?:[^{}]|\{[^{}]*\})*\}|[^\s"'=<>`{}]+))?)*"""
)
_TAG = re.compile(r"<(/?)([A-Za-z][\w.-]*)(" + _ATTRS + r")\s*(/?)>")
_STYLE_OR_SCRIPT = re.compile(r"<(style|script)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_KEPT_ATTR = re.compile(r"""\b(?:title|name|label)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_EXPRESSION = re.compile(r"\{(?!\*)(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}")
_MARKUP_CHARS = re.compile(r"[<{\[`*_\\]")
_LINK = re.compile(r"\[([^\[\]\n]*)\](?:\([^()\s]*(?:[ \t]+\"[^\"\n]*\")?\)|\[[^\[\]\n]*\])")
_UNDERSCORES = re.compile(r"_+")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_BACKTICKS = re.compile(r"`+")
_SPAN_MARK = re.compile("\ue000(\\d+)\ue001")
_SLUG_DROP = re.compile(r"[^\w\- ]")
_BLANK_RUN = re.compile(r"\n(?:[ \t]*\n)+")
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


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


def slugify(text: str) -> str:
    """Return the GitHub-style slug of a heading's plain text."""
    return _SLUG_DROP.sub("", text.lower()).replace(" ", "-")


def parse_page(text: str, *, source: str, mdx: bool) -> ParsedPage:
    """Read a page's text into front matter and sections.

    ``source`` names the file in error messages; ``mdx`` turns on the MDX rules
    (ESM lines and ``{expressions}`` dropped).
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    meta, start = read_front_matter(lines, source)
    return ParsedPage(
        title=meta_text(meta, "title", lines, source),
        description=meta_text(meta, "description", lines, source),
        keywords=meta_keywords(meta, lines, source),
        sections=_cut_sections(lines[start:], mdx),
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
    head: tuple[str, str, int] = ("", "", 0)  # anchor, title, level of the open section
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
                admonition = _ADMONITION.match(line)
                if admonition:
                    title = _admonition_title(admonition)
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


def _admonition_title(found: re.Match[str]) -> str:
    """An admonition opener keeps its title, else its kind ('Note'); closers keep nothing."""
    kind = found.group(1) or found.group(3) or found.group(5)
    title = found.group(2) or found.group(4) or found.group(6) or found.group(7)
    return title or (kind or "").capitalize()


def _drop_comments(line: str, mdx: bool) -> tuple[str, str | None]:
    """Remove HTML (and MDX) comments from a line; return it and the closer still awaited."""
    openers = (("<!--", "-->"), ("{/*", "*/}")) if mdx else (("<!--", "-->"),)
    for opener, closer in openers:
        start = line.find(opener)
        while start >= 0 and line.count("`", 0, start) % 2 == 0:
            end = line.find(closer, start + len(opener))
            if end < 0:
                return line[:start], closer
            line = line[:start] + line[end + len(closer) :]
            start = line.find(opener, start)
    return line, None


def _open_section(raw_heading: str, level: int, used: dict[str, int], mdx: bool) -> tuple[str, str, int]:
    explicit, raw_heading = _explicit_id(raw_heading)
    title = _plain_inline(raw_heading, mdx=mdx)
    # github-slugger's rule: the first repeat of "x" becomes "x-1", then "x-2", ...
    base = candidate = explicit or slugify(title) or "section"
    while candidate in used:
        used[base] += 1
        candidate = f"{base}-{used[base]}"
    used[candidate] = 0
    return candidate, title, level


def _close_section(
    sections: list[RawSection], head: tuple[str, str, int], parts: list[str], prose: list[str], mdx: bool
) -> None:
    if prose:
        parts.append(_prose_text(prose, mdx))
    text = "\n".join(part for part in parts if part).strip("\n")
    anchor, title, level = head
    # The untitled preamble exists only when it holds text.
    if level or text:
        sections.append(RawSection(anchor=anchor, title=title, level=level, text=text))


def _explicit_id(heading: str) -> tuple[str | None, str]:
    found = _ATTR_LIST.search(heading)
    if not found:
        return None, heading
    tokens = found.group(1).split()
    if not tokens or not all(_ATTR_TOKEN.fullmatch(token) for token in tokens):
        return None, heading
    ids = [token[1:] for token in tokens if token.startswith("#")]
    return (ids[0] if ids else None), heading[: found.start()]


def _prose_text(lines: list[str], mdx: bool) -> str:
    """Prose lines as text: markup reduced, blank runs cut to one, one blank kept at each edge."""
    text = "\n".join(lines)
    text = _reduce_markup(text, mdx=mdx, keep_attrs=True, inline=False)
    if " \n" in text or "\t\n" in text or text.endswith((" ", "\t")):
        text = _TRAILING_SPACE.sub("", text)
    if not text.strip():
        return ""
    text = _BLANK_RUN.sub("\n\n", text)
    # One blank line is kept at each edge: it parts this prose from a code fence beside it.
    if text.startswith("\n"):
        text = "\n" + text.lstrip("\n")
    if text.endswith("\n"):
        text = text.rstrip("\n") + "\n"
    return text


def _plain_inline(text: str, *, mdx: bool) -> str:
    """Return a heading's inline Markdown as plain text: no tags, links, emphasis or backticks."""
    if _MARKUP_CHARS.search(text):
        text = _reduce_markup(text, mdx=mdx, keep_attrs=False, inline=True)
    return " ".join(text.split())


def _reduce_markup(text: str, *, mdx: bool, keep_attrs: bool, inline: bool) -> str:
    # Each rule runs only when its opening character occurs: most text has none of them.
    spans: list[str] = []
    # Code spans need hiding only from the rules below that could touch them.
    if "`" in text and (inline or "<" in text or "[" in text or (mdx and "{" in text)):
        text = _hide_code_spans(text.replace("\ue000", "").replace("\ue001", ""), spans, inline)
    if "<" in text:
        if "<s" in text or "<S" in text:
            text = _STYLE_OR_SCRIPT.sub("", text)
        text = _TAG.sub(_keep_component_title if keep_attrs else "", text)
    if mdx and "{" in text:
        text = _EXPRESSION.sub("", text)
    if "[" in text:
        text = _LINK.sub(r"\1", text.replace("![", "["))
    if inline:
        text = text.replace("*", "")
        if "_" in text:
            text = _UNDERSCORES.sub(_emphasis_underscores, text)
        if "\\" in text:
            text = _ESCAPE.sub(r"\1", text)
    if not spans:
        return text

    def _restore(match: re.Match[str]) -> str:
        return spans[int(match.group(1))]

    return _SPAN_MARK.sub(_restore, text)


def _emphasis_underscores(match: re.Match[str]) -> str:
    """Underscores that open or close emphasis go; those inside a word (snake_case) stay."""
    text, start, end = match.string, match.start(), match.end()
    inside = 0 < start and end < len(text) and text[start - 1].isalnum() and text[end].isalnum()
    return match.group() if inside else ""


def _keep_component_title(match: re.Match[str]) -> str:
    """A JSX component's title/name/label stays as a line of text; every other tag goes."""
    closing, name, attrs, _ = match.groups()
    if closing or not name[0].isupper():
        return ""
    kept = " ".join(a or b for a, b in _KEPT_ATTR.findall(attrs) if a or b)
    if not kept:
        return ""
    return kept if match.string.startswith("\n", match.end()) else kept + "\n"


def _hide_code_spans(text: str, spans: list[str], inline: bool) -> str:
    """Swap each `code span` for a marker so markup rules leave its content alone.

    A span opens with a run of backticks and closes at the next run of the same
    length within the paragraph; an unmatched run is literal text.
    """
    runs = [found.span() for found in _BACKTICKS.finditer(text)]
    out: list[str] = []
    done = 0
    k = 0
    while k < len(runs) - 1:
        start, end = runs[k]
        width = end - start
        j = k + 1
        while j < len(runs) and runs[j][1] - runs[j][0] != width:
            j += 1
        if j == len(runs) or "\n\n" in text[end : runs[j][0]]:
            k += 1
            continue
        close_start, close_end = runs[j]
        out.append(text[done:start])
        out.append(f"\ue000{len(spans)}\ue001")
        spans.append(text[end:close_start].strip() if inline else text[start:close_end])
        done = close_end
        k = j + 1
    out.append(text[done:])
    return "".join(out)
