"""Inline Markdown, HTML and MDX reduced to the text a reader sees.

Tags give way to what they wrap (a JSX component keeps its title), ``<style>`` and
``<script>`` elements go whole, MDX ``{expressions}`` go, links keep their text, and
in headings emphasis, escapes and backticks go too. Code spans are hidden from every
rule while it runs, so their content stays as written.

Every rule here runs in time linear in the text, whatever the text: a docs page in a
pull request is untrusted input, and one line built to make a regex backtrack would
stall ``index``, ``eval`` and ``serve``. Where a regex would have to scan ahead from
every position (an opener with no closer), the scan is done by hand, once.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

_ATTRS = (
    r"""(?:\s+[\w:.-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|\{(?:[^{}]|\{[^{}]*\})*\}|[^\s"'=<>`{}]+))?)*"""
)
_TAG = re.compile(r"<(/?)([A-Za-z][\w.-]*)(" + _ATTRS + r")\s*(/?)>")
# The two kinds are told apart by the group: a closer must be of its opener's kind.
_STYLE_OR_SCRIPT_OPEN = re.compile(r"<(?:(style)|script)\b", re.IGNORECASE)
_STYLE_OR_SCRIPT_CLOSE = re.compile(r"</(?:(style)|script)\s*>", re.IGNORECASE)
_KEPT_ATTR = re.compile(r"""\b(?:title|name|label)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_EXPRESSION = re.compile(r"\{(?!\*)(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}")
_MARKUP_CHARS = re.compile(r"[<{\[`*_\\]")
_LINK = re.compile(r"\[([^\[\]\n]*)\](?:\([^()\s]*(?:[ \t]+\"[^\"\n]*\")?\)|\[[^\[\]\n]*\])")
_UNDERSCORES = re.compile(r"_+")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_BACKTICKS = re.compile(r"`+")
_PARAGRAPH_BREAK = re.compile(r"(?=\n\n)")
_SPAN_MARK = re.compile("\ue000(\\d+)\ue001")


def plain_inline(text: str, *, mdx: bool) -> str:
    """Return a heading's inline Markdown as plain text: no tags, links, emphasis or backticks."""
    if _MARKUP_CHARS.search(text):
        text = reduce_markup(text, mdx=mdx, keep_attrs=False, inline=True)
    return " ".join(text.split())


def reduce_markup(text: str, *, mdx: bool, keep_attrs: bool, inline: bool) -> str:
    """Return text with its inline markup reduced; ``keep_attrs`` keeps components' titles as lines."""
    # Each rule runs only when its opening character occurs: most text has none of them.
    spans: list[str] = []
    # Code spans need hiding only from the rules below that could touch them.
    if "`" in text and (inline or "<" in text or "[" in text or (mdx and "{" in text)):
        text = _hide_code_spans(text.replace("\ue000", "").replace("\ue001", ""), spans, inline)
    if "<" in text:
        if "<s" in text or "<S" in text:
            text = _drop_style_and_script(text)
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


def _drop_style_and_script(text: str) -> str:
    """Remove each ``<style>``/``<script>`` element, from its opener to the first closer of its kind.

    One pass from left to right, as a substitution would go, but each opener looks its
    closer up among those found once, rather than scanning the rest of the text for it:
    a page of openers with no closer costs one pass, not one scan per opener. An
    opener with no ``>`` after it, or no closer after its ``>``, stays, and the tag rule
    then drops the opening tag alone.
    """
    closers: dict[bool, list[tuple[int, int]]] = {True: [], False: []}  # is it style → (start, end)
    for found in _STYLE_OR_SCRIPT_CLOSE.finditer(text):
        closers[found.group(1) is not None].append(found.span())
    starts = {kind: [start for start, _ in spans] for kind, spans in closers.items()}
    out: list[str] = []
    done = 0
    bracket = -1  # the first '>' at or after the last opener's name
    for opener in _STYLE_OR_SCRIPT_OPEN.finditer(text):
        if opener.start() < done:
            continue  # inside an element already dropped
        if bracket < opener.end():
            bracket = text.find(">", opener.end())
            if bracket < 0:
                break  # no opener from here on is closed by a '>'
        kind = opener.group(1) is not None
        index = bisect_left(starts[kind], bracket + 1)
        if index == len(starts[kind]):
            continue
        out.append(text[done : opener.start()])
        done = closers[kind][index][1]
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


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
    length within the paragraph; an unmatched run is literal text. The next run of a
    length, and whether a paragraph ends before it, are looked up in indexes built
    once: scanning ahead from each run would cost time growing with the square of
    the runs on a page full of unmatched ones.
    """
    runs = [found.span() for found in _BACKTICKS.finditer(text)]
    if len(runs) < 2:
        return text
    of_width: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        of_width.setdefault(end - start, []).append(index)
    breaks = [found.start() for found in _PARAGRAPH_BREAK.finditer(text)]
    out: list[str] = []
    done = 0
    k = 0
    while k < len(runs) - 1:
        start, end = runs[k]
        same = of_width[end - start]
        after = bisect_right(same, k)
        if after == len(same):
            k += 1
            continue
        j = same[after]
        close_start, close_end = runs[j]
        paragraph_end = bisect_left(breaks, end)
        if paragraph_end < len(breaks) and breaks[paragraph_end] + 2 <= close_start:
            k += 1
            continue
        out.append(text[done:start])
        out.append(f"\ue000{len(spans)}\ue001")
        spans.append(text[end:close_start].strip() if inline else text[start:close_end])
        done = close_end
        k = j + 1
    out.append(text[done:])
    return "".join(out)
