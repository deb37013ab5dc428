"""Answers in the HTML report: the small part of Markdown that answers use, rendered safely.

A model's answer is untrusted text, so every character of it is escaped and only
the constructs below become markup: code fences (kept line for line, citation-like
brackets inside them left alone), paragraphs, bullet and numbered lists, headings
(as bold lines), block quotes, ``code`` spans, **bold**, *italic*, links to http(s),
mailto or relative addresses (any other scheme, such as ``javascript:``, shows as
text), and the panel's citation markers ``[n]``. Admonition openers (``!!! tip``,
``:::note``) are dropped, and so is an admonition's title word that a baseline's
quote runs into its first sentence ("Tip Use …" reads "Use …").

Untrusted text must not cost more than its length: every inline pattern's spans are
bounded (a ``**`` with no partner is tried over at most a couple of hundred
characters), and blocks are read in one pass over the lines.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping

from docpilot.assistant.render import marker_labels

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$")
_ADMONITION = re.compile(r"^[ \t]*(?:!!!|\?\?\?\+?|:::|///)")
_ITEM = re.compile(r"^[ \t]*(?:([-*+])|(\d{1,9})[.)])[ \t]+(.*)$")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_QUOTE = re.compile(r"^[ \t]{0,3}>[ \t]?(.*)$")
# An admonition's title word run into the sentence after it: a capitalised kind, then a capital.
_TITLE_RUN = re.compile(
    r"(^|(?<=[.!?\]:]\s))(?:Note|Tip|Hint|Info|Important|Warning|Caution|Danger|Attention|Seealso|Todo)[ \t]+"
    r"(?=[A-Z`*_\"'(\[])"
)
_INLINE = re.compile(
    r"(?P<tick>`{1,3})(?P<code>[^`\n]{1,1000}?)(?P=tick)"
    r"|\[(?P<label>[^\[\]\n]{1,200})\]\((?P<url>[^()\s]{1,2000})\)"
    r"|(?P<space>[ \t]*)\[(?P<marker>[^\[\]\n]{1,200})\](?!\()"
    r"|\*\*(?P<strong>[^\s*](?:[^\n]{0,200}?[^\s*])?)\*\*"
    r"|__(?P<strong_>[^\s_](?:[^\n]{0,200}?[^\s_])?)__"
    r"|(?<![\w*])\*(?P<em>[^\s*](?:[^*\n]{0,200}?[^\s*])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<em_>[^\s_](?:[^_\n]{0,200}?[^\s_])?)_(?![\w_])"
)
_SAFE_URL = re.compile(r"^(?:https?://|mailto:|#|/|\./|\.\./|[\w.\-/]+(?:#[\w.\-]*)?$)", re.I)


def render_answer(answer: str, links: Mapping[str, str], primed: Collection[str]) -> str:
    """The answer as an HTML fragment of block elements, with its citation markers linked.

    ``links`` maps a marker's number to its source's address, ``primed`` holds the
    primed section ids. A marker is handled as the answer panel handles it: a number
    of a primed source becomes a link, a primed section id stays as text, and any
    other number or section id (a hallucinated citation) is left out.
    """
    reader = _BlockReader(links, primed)
    for line in answer.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        reader.read(line)
    return reader.finish()


class _BlockReader:
    """The answer's lines read into HTML blocks in one pass, the open paragraph, list or fence kept between lines."""

    def __init__(self, links: Mapping[str, str], primed: Collection[str]) -> None:
        self.links = links
        self.primed = primed
        self.blocks: list[str] = []
        self.paragraph: list[str] = []
        self.items: list[str] = []
        self.ordered: str | None = None  # the first number of an open numbered list, "" for a bullet list
        self.fence: str | None = None
        self.code: list[str] = []
        self.language = ""

    def read(self, line: str) -> None:
        """Take the answer's next line."""
        if self.fence is not None:
            self._fenced(line, self.fence)
        elif not self._block_line(line):
            self._text_line(line)

    def finish(self) -> str:
        """Close whatever is open and return the blocks as one fragment."""
        if self.fence is not None:  # a fence never closed runs to the end of the answer
            self.blocks.append(_code_block(self.code, self.language))
        self.close()
        return "".join(self.blocks)

    def close(self) -> None:
        """End the open paragraph or list, if any, as a block."""
        if self.paragraph:
            self.blocks.append(f"<p>{self._inline(' '.join(self.paragraph))}</p>")
            self.paragraph.clear()
        if self.items:
            rendered = "".join(f"<li>{self._inline(item)}</li>" for item in self.items)
            if self.ordered:
                start = "" if self.ordered == "1" else f' start="{int(self.ordered)}"'
                self.blocks.append(f"<ol{start}>{rendered}</ol>")
            else:
                self.blocks.append(f"<ul>{rendered}</ul>")
            self.items.clear()
        self.ordered = None

    def _inline(self, text: str) -> str:
        """A paragraph's, item's, heading's or quote's text as inline markup, an admonition's run-in title dropped."""
        return _inline(_TITLE_RUN.sub("", text.strip()), self.links, self.primed)

    def _fenced(self, line: str, fence: str) -> None:
        """A line inside an open code fence: kept as written, or the fence's closer."""
        stripped = line.strip()
        if stripped and stripped == fence[0] * len(stripped) and len(stripped) >= len(fence):
            self.blocks.append(_code_block(self.code, self.language))
            self.fence, self.code = None, []
        else:
            self.code.append(line)

    def _block_line(self, line: str) -> bool:
        """Handle a line that opens a fence, separates blocks or is a block of its own; False for any other line."""
        opened = _FENCE.match(line)
        if opened:
            self.close()
            self.fence, self.language, self.code = opened.group(1), opened.group(2), []
            return True
        if not line.strip() or _ADMONITION.match(line):
            self.close()  # a blank line, or an admonition's opener or closer: its title is a label, not text
            return True
        heading = _HEADING.match(line)
        if heading:
            self.close()
            self.blocks.append(f"<p><strong>{self._inline(heading.group(1))}</strong></p>")
            return True
        quote = _QUOTE.match(line)
        if quote:
            self.close()
            self.blocks.append(f"<blockquote>{self._inline(quote.group(1))}</blockquote>")
            return True
        return False

    def _text_line(self, line: str) -> None:
        """A list item, a wrapped line of the open item, or a line of a paragraph."""
        item = _ITEM.match(line)
        if item:
            self._item(item.group(2) or "", item.group(3))
        elif self.items and line[:1] in " \t":
            self.items[-1] += " " + line.strip()  # a wrapped line of the open item
        else:
            if self.items:
                self.close()
            self.paragraph.append(line)

    def _item(self, kind: str, text: str) -> None:
        """A list item's line: added to the open list, or the first of a new one."""
        if self.paragraph:
            self.close()
        if self.items and bool(self.ordered) != bool(kind):
            self.close()  # a bullet after numbers, or numbers after bullets: a new list
        if not self.items:
            self.ordered = kind
        self.items.append(text)


def _code_block(lines: list[str], language: str) -> str:
    kind = re.sub(r"[^\w+-]", "", language)[:30]
    attribute = f' class="language-{kind}"' if kind else ""
    return f"<pre><code{attribute}>{_escape(chr(10).join(lines))}</code></pre>"


def _inline(text: str, links: Mapping[str, str], primed: Collection[str]) -> str:
    """One paragraph or list item: escaped text with code, links, emphasis and citation markers."""
    out: list[str] = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[position : match.start()]))
        position = match.end()
        if match.group("code") is not None:
            out.append(f"<code>{_escape(match.group('code'))}</code>")
        elif match.group("url") is not None:
            out.append(_link(match.group("label"), match.group("url"), links, primed))
        elif match.group("marker") is not None:
            out.append(_marker(match.group("space"), match.group("marker"), links, primed))
        elif (inner := match.group("strong") or match.group("strong_")) is not None:
            out.append(f"<strong>{_inline(inner, links, primed)}</strong>")
        else:
            out.append(f"<em>{_inline(match.group('em') or match.group('em_'), links, primed)}</em>")
    out.append(_escape(text[position:]))
    return "".join(out)


def _link(label: str, url: str, links: Mapping[str, str], primed: Collection[str]) -> str:
    shown = _inline(label, links, primed)
    if not _SAFE_URL.match(url):
        return shown  # javascript:, data: and other schemes: the words only
    return f'<a href="{_escape(url)}">{shown}</a>'


def _marker(space: str, body: str, links: Mapping[str, str], primed: Collection[str]) -> str:
    labels = marker_labels(body)
    if labels is None:
        return _escape(f"{space}[{body}]")  # brackets that are no citation: text as written
    shown = []
    for label in labels:
        if label in links:
            shown.append(f'<a class="cite" href="{_escape(links[label])}">[{_escape(label)}]</a>')
        elif not label.isdigit() and label in primed:
            shown.append(_escape(f"[{label}]"))
        # any other marker names no primed source: left out, as the panel leaves it out
    return (_escape(space) + "".join(shown)) if shown else ""


def _escape(text: str) -> str:
    return html.escape(_CONTROL.sub("\ufffd", text), quote=True)
