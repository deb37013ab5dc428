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
    blocks: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    ordered: str | None = None  # the first number of an open numbered list, "" for a bullet list
    lines = answer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    fence: str | None = None
    code: list[str] = []
    language = ""

    def inline(text: str) -> str:
        return _inline(_TITLE_RUN.sub("", text.strip()), links, primed)

    def close() -> None:
        nonlocal ordered
        if paragraph:
            blocks.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            rendered = "".join(f"<li>{inline(item)}</li>" for item in items)
            if ordered:
                start = "" if ordered == "1" else f' start="{int(ordered)}"'
                blocks.append(f"<ol{start}>{rendered}</ol>")
            else:
                blocks.append(f"<ul>{rendered}</ul>")
            items.clear()
        ordered = None

    for line in lines:
        if fence is not None:
            stripped = line.strip()
            if stripped and stripped == fence[0] * len(stripped) and len(stripped) >= len(fence):
                blocks.append(_code_block(code, language))
                fence, code = None, []
            else:
                code.append(line)
            continue
        opened = _FENCE.match(line)
        if opened:
            close()
            fence, language, code = opened.group(1), opened.group(2), []
            continue
        if not line.strip():
            close()
            continue
        if _ADMONITION.match(line):
            close()  # an opener or closer: its title is a label, not part of the answer's text
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            blocks.append(f"<p><strong>{inline(heading.group(1))}</strong></p>")
            continue
        quote = _QUOTE.match(line)
        if quote:
            close()
            blocks.append(f"<blockquote>{inline(quote.group(1))}</blockquote>")
            continue
        item = _ITEM.match(line)
        if item:
            if paragraph:
                close()
            kind = item.group(2) or ""
            if items and bool(ordered) != bool(kind):
                close()  # a bullet after numbers, or numbers after bullets: a new list
            if not items:
                ordered = kind
            items.append(item.group(3))
            continue
        if items and line[:1] in " \t":
            items[-1] += " " + line.strip()  # a wrapped line of the open item
            continue
        if items:
            close()
        paragraph.append(line)
    if fence is not None:  # a fence never closed runs to the end of the answer
        blocks.append(_code_block(code, language))
    close()
    return "".join(blocks)


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
