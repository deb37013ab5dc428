"""The answer panel a reader sees: answer text with linked markers, and Sources rows beneath.

The same renderer serves the eval and the server, so what the eval scores is what a
reader gets. Rules:

- ``[n]`` (also ``[1, 2]`` or ``[1][2]``) where n numbers a primed source becomes a
  link to that source: docs base URL + page path + ``#anchor``.
- ``[n]`` that numbers no primed source is a hallucinated citation: it is removed from
  the text and recorded.
- A section id in brackets where a marker belongs (``[guide/setup#install]``) is left
  as plain text when it names a primed source: it is recorded as a marker but is not
  a link. One that names no primed source is a hallucinated citation, like a number
  out of range: removed from the text and recorded.
- Sources rows list the cited sources; an answer that cites nothing is shown with the
  sources it was primed with. An answer shown with Sources and no working link is
  *unlinked*.
- A code block (a fence, as a model or the extractive baseline's quoted command writes
  it) is shown as code: brackets in it are code, never markers.
- An assistant that says what it cites apart from its text (a target's
  ``reply.citations``) is read by that list instead of its markers: each item that
  names a source is a citation and a link, one that names none is hallucinated.
- A refusal is shown as a message, with no Sources.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from docpilot.models.base import Source

RENDERER_VERSION = "3"

# [3], [1, 2], [guide/setup#install] — but not a Markdown link's [text](url).
_MARKER = re.compile(r"\[([^\[\]\n]{1,200})\](?!\()")
_NUMBERS = re.compile(r"^\s*\d+(?:\s*,\s*\d+)*\s*$")
_SECTION_ID = re.compile(r"^[\w.\-/]+#[\w.\-]*$")


class SourceRow(BaseModel):
    """One Sources row under an answer."""

    model_config = ConfigDict(extra="forbid")

    n: int
    """The marker number."""
    section_id: str
    """The section shown."""
    title: str
    """Its heading path."""
    url: str
    """Where the link goes."""


class Panel(BaseModel):
    """A rendered answer and the facts about its links that the scorer reads."""

    model_config = ConfigDict(extra="forbid")

    markdown: str
    """The panel as Markdown: linked text, then Sources."""
    html: str
    """The panel as an HTML fragment, every model string escaped."""
    markers: list[str] = Field(default_factory=list)
    """Every marker as written, in order."""
    citations: list[str] = Field(default_factory=list)
    """Section ids of markers that resolved, first mention first."""
    hallucinated: list[str] = Field(default_factory=list)
    """Markers that named no primed source, numbers and section ids alike (removed)."""
    sources: list[SourceRow] = Field(default_factory=list)
    """The Sources rows shown."""
    links: int = 0
    """Working links in the answer text."""


def marker_labels(body: str) -> list[str] | None:
    """The labels inside one bracket, or None when it is not a citation marker at all."""
    if _NUMBERS.match(body):
        return [p.strip() for p in body.split(",")]
    if _SECTION_ID.match(body.strip()):
        return [body.strip()]
    return None


# A Markdown code span in escaped text: backticks around text with no tag and no line break,
# so a span never reaches into a citation link.
_CODE_SPAN = re.compile(r"`([^`<>\n]+)`")


def _code_spans(escaped: str) -> str:
    """Escaped answer text with `code` spans shown as <code>, as a reader of Markdown expects."""
    return _CODE_SPAN.sub(r"<code>\1</code>", escaped)


def _tidy(text: str) -> str:
    """The space a marker's removal leaves before punctuation goes; code blocks stay as written."""
    if "```" not in text and "~~~" not in text:
        return re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    out, pos = [], 0
    for start, end, _ in _code_blocks(text):
        out += [re.sub(r"[ \t]+([.,;:!?])", r"\1", text[pos:start]), text[start:end]]
        pos = end
    out.append(re.sub(r"[ \t]+([.,;:!?])", r"\1", text[pos:]))
    return "".join(out)


_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+-]*)[^`\n]*$")


def _code_blocks(answer: str) -> list[tuple[int, int, str]]:
    """Where each fenced code block of the answer lies: (start, end, language); a fence left open runs to the end."""
    blocks: list[tuple[int, int, str]] = []
    opened: tuple[int, str, str] | None = None  # start, fence, language
    pos = 0
    for line in answer.splitlines(keepends=True):
        stripped = line.strip()
        if opened is None:
            found = _FENCE.match(line.rstrip("\n"))
            if found:
                opened = (pos, found.group(1), found.group(2))
        elif len(stripped) >= len(opened[1]) and stripped == opened[1][0] * len(stripped):
            blocks.append((opened[0], pos + len(line.rstrip("\n")), opened[2]))
            opened = None
        pos += len(line)
    if opened is not None:
        blocks.append((opened[0], len(answer), opened[2]))
    return blocks


def _html_text(text: str) -> str:
    """Answer text (markers already linked) as paragraphs and code blocks."""
    if "```" not in text and "~~~" not in text:
        return f"<p>{_code_spans(text.strip())}</p>"
    out: list[str] = []
    pos = 0
    for start, end, language in _code_blocks(text):
        prose = text[pos:start].strip()
        if prose:
            out.append(f"<p>{_code_spans(prose)}</p>")
        lines = text[start:end].split("\n")[1:]
        if lines and lines[-1].strip() and set(lines[-1].strip()) <= {"`", "~"}:
            lines.pop()  # the closing fence
        kind = f' class="language-{language}"' if language else ""
        out.append(f"<pre><code{kind}>{chr(10).join(lines)}</code></pre>")
        pos = end
    rest = text[pos:].strip()
    if rest:
        out.append(f"<p>{_code_spans(rest)}</p>")
    return "".join(out)


@dataclass
class _Cites:
    """What an answer cites, gathered as it is read, and its text as shown (Markdown and HTML pieces)."""

    markers: list[str] = field(default_factory=list)
    cited: dict[str, Source] = field(default_factory=dict)
    hallucinated: list[str] = field(default_factory=list)
    links: int = 0
    md: list[str] = field(default_factory=list)
    html: list[str] = field(default_factory=list)


def _read_markers(answer: str, sources: Sequence[Source], url_for: Callable[[str], str]) -> _Cites:
    """The answer's ``[n]`` and ``[section#id]`` markers resolved against its sources, each ``[n]`` linked."""
    by_n = {str(s.n): s for s in sources}
    primed = {s.section_id for s in sources}
    cites = _Cites()
    pos = 0
    code = _code_blocks(answer) if "```" in answer or "~~~" in answer else []
    for match in _MARKER.finditer(answer):
        labels = marker_labels(match.group(1))
        if labels is None or any(start <= match.start() < end for start, end, _ in code):
            continue
        cites.md.append(answer[pos : match.start()])
        cites.html.append(html.escape(answer[pos : match.start()]))
        pos = match.end()
        for label in labels:
            cites.markers.append(label)
            source = by_n.get(label)
            if source is not None:
                cites.cited.setdefault(source.section_id, source)
                url = url_for(source.section_id)
                cites.links += 1
                cites.md.append(f"[[{label}]]({url})")
                cites.html.append(f'<a class="cite" href="{html.escape(url, quote=True)}">[{label}]</a>')
            elif label.isdigit() or label not in primed:
                cites.hallucinated.append(label)
            else:
                cites.md.append(f"[{label}]")
                cites.html.append(html.escape(f"[{label}]"))
    cites.md.append(answer[pos:])
    cites.html.append(html.escape(answer[pos:]))
    return cites


def _read_given(answer: str, sources: Sequence[Source], given: Sequence[str]) -> _Cites:
    """Citations the assistant gave apart from its text, resolved against its sources; the text is kept as written.

    Each is a source's number or a section id. One that names a source is a citation and
    a link (the assistant shows it beside the answer); one that names none is hallucinated,
    as a marker out of range is.
    """
    by_label = {s.section_id: s for s in sources} | {str(s.n): s for s in sources}
    cites = _Cites(markers=list(given), md=[answer], html=[html.escape(answer)])
    for label in given:
        source = by_label.get(label)
        if source is None:
            cites.hallucinated.append(label)
            continue
        cites.cited.setdefault(source.section_id, source)
        cites.links += 1
    return cites


def render_panel(
    answer: str,
    sources: Sequence[Source],
    url_for: Callable[[str], str],
    *,
    refused: bool = False,
    cited: Sequence[str] | None = None,
) -> Panel:
    """Render one answer against the sources it was primed with.

    ``cited`` is what the answer cites when the assistant gave it apart from the text (a
    target's ``reply.citations``), each a source's number or a section id; the text's
    markers are then not read. None: the markers say what the answer cites.
    """
    if refused:
        text = "The documentation does not answer this question."
        return Panel(markdown=text, html=f'<div class="panel refused"><p>{html.escape(text)}</p></div>')
    cites = _read_markers(answer, sources, url_for) if cited is None else _read_given(answer, sources, cited)
    shown = list(cites.cited.values()) or list(sources)
    rows = [SourceRow(n=s.n, section_id=s.section_id, title=s.title, url=url_for(s.section_id)) for s in shown]
    body = _tidy("".join(cites.md)).strip()
    markdown = body
    if rows:
        markdown += "\n\nSources:\n" + "\n".join(f"- [{r.n}] [{r.title}]({r.url})" for r in rows)
    html_rows = "".join(
        f'<li><a href="{html.escape(r.url, quote=True)}">[{r.n}] {html.escape(r.title)}</a></li>' for r in rows
    )
    fragment = f'<div class="panel">{_html_text("".join(cites.html))}'
    if rows:
        fragment += f'<ol class="sources">{html_rows}</ol>'
    fragment += "</div>"
    return Panel(
        markdown=markdown,
        html=fragment,
        markers=cites.markers,
        citations=list(cites.cited),
        hallucinated=cites.hallucinated,
        sources=rows,
        links=cites.links,
    )
