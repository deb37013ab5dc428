"""Static-site generators' template syntax read as the plain Markdown a reader of the site sees.

Hugo shortcodes (``{{< name >}}``, ``{{% name %}}``, paired or single), Liquid and
Jinja tags (``{% hint %}``, ``{% include %}``, ``{% raw %}``, ``{{ page.title }}``,
``{# comment #}``), MyST directives (```` ```{note} ```` and ``:::{note}`` with
``:option:`` lines), MyST roles (`` {ref}`target` ``) and ``(label)=`` targets are
rewritten before the Markdown reader cuts the page into sections:

- a wrapper (an admonition, tabs, a hint) gives way to its body; its kind is dropped,
  a title it carries (``title="…"``, a directive's argument) stays as a line;
- a cross-reference (``relref``, ``ref``, ``{ref}``, ``{doc}``, ``{% link %}``) keeps
  the text a reader sees and leaves a link marker that the reader turns into the
  section's ``links`` (the page or section id it names);
- an include, a macro or any construct whose output cannot be known is dropped and
  counted by kind, so ``docpilot index`` can say what was lost;
- code fences (and code directives, Hugo ``highlight``) keep their content verbatim:
  template syntax inside code is code, as are code spans.

Like the rest of the parser this takes time linear in the page's length: each
opener looks its closer up through a search that never goes back over text it has
searched (``_Closers``), and the lines a construct spans are joined only when its
closer is known to come before the next blank line.
"""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_DIRECTIVE_INFO = re.compile(r"^\{([\w:.+-]+)\}[ \t]*(.*)$")
_COLON_DIRECTIVE = re.compile(r"^[ \t]*(:{3,})\{([\w:.+-]+)\}[ \t]*(.*)$")
_OPTION = re.compile(r"^[ \t]*:[\w-]+:(?:[ \t].*)?$")
_LABEL = re.compile(r"^[ \t]*\(([^()\s]+)\)=[ \t]*$")
_ATX = re.compile(r"^( {0,3}#{1,6}[ \t]+)(.*)$")
_HIGHLIGHT = re.compile(r"^[ \t]*\{\{[<%]-?[ \t]*highlight[ \t]+([\w+#.-]*)[^}]*[>%]\}\}[ \t]*$")
_HIGHLIGHT_END = re.compile(r"^[ \t]*\{\{[<%]-?[ \t]*/highlight[ \t]*-?[>%]\}\}[ \t]*$")
_TOKEN = re.compile(r"`+|\{\{-?[<%]?|\{%|\{#|\{[\w:.+-]+\}(?=`)")
# MDX pages write JavaScript in braces (``style={{color: 'red'}}``): their braces are the MDX rules'.
_MDX_TOKEN = re.compile(r"`+|\{[\w:.+-]+\}(?=`)")
_BACKTICKS = re.compile(r"`+")
_PAIRED = re.compile(r"\{\{[<%]-?[ \t]*/[ \t]*([\w./-]+)")
# A tag closed somewhere in the page ({% endname %}, Markdoc's {% /name %}) wraps what it opens.
_PAIRED_TAG = re.compile(r"\{%-?[ \t]*(?:/[ \t]*|end)([\w-]+)")
_ENDRAW = re.compile(r"\{%-?[ \t]*endraw[ \t]*-?%\}")
_ENDCOMMENT = re.compile(r"\{%-?[ \t]*endcomment[ \t]*-?%\}")
_ARG = re.compile(r"""([\w-]+)[ \t]*=[ \t]*(?:"([^"]*)"|'([^']*)'|(\S+))|"([^"]*)"|'([^']*)'|(\S+)""")
_MARK = re.compile("[\ue002-\ue005]")
_CLOSER = {"{{<": ">}}", "{{%": "%}}", "{{-<": ">}}", "{{-%": "%}}", "{%": "%}", "{#": "#}"}
_UNCLOSED_KIND = {"{%": "template tag", "{{": "template expression", "{{-": "template expression", "{#": ""}

LINK_OPEN, LINK_CLOSE = "\ue002", "\ue003"
"""Around a cross-reference's target in the rewritten text; the section keeps it as a link."""
LABEL_OPEN, LABEL_CLOSE = "\ue004", "\ue005"
"""Around a MyST ``(label)=`` target, put at the start of the heading it names."""

RAW_FENCE = "~~~~~~"
"""The fence around a ``{% raw %}`` block: long, so no fence of the page's own closes it."""

JOIN_LINES = 20
"""Most lines a shortcode or tag may span: its closer must come within them, before a blank line."""

_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "code-cell", "mermaid", "math", "eval-rst"})
_INCLUDE_DIRECTIVES = frozenset({"include", "literalinclude"})
_DROPPED_DIRECTIVES = frozenset({
    "toctree", "image", "contents", "raw", "autoclass", "automodule", "autofunction", "automethod",
    "autodata", "autoattribute", "autosummary", "autoexception", "tableofcontents",
})
_INCLUDE_TAGS = frozenset({
    "include", "include_relative", "include_cached", "import", "from", "extends", "render", "embed",
})
_LINK_TAGS = frozenset({"link", "post_url"})
_WRAPPER_TAGS = frozenset({"hint", "tabs", "tab", "code", "content-ref", "stepper", "step", "details", "raw"})
_CONTINUATION_TAGS = frozenset({"else", "elif", "elsif", "when", "empty"})
_XREF_SHORTCODES = frozenset({"ref", "relref"})
_FIGURE_SHORTCODES = frozenset({"figure", "img", "image"})
_KEPT_ARGS = ("title", "name", "header", "label")
_FIGURE_ARGS = ("caption", "title", "alt")
_XREF_ROLES = frozenset({"ref", "doc", "numref", "any"})
_CODE_ROLES = frozenset({"code", "math", "kbd", "samp", "file", "command", "envvar", "option", "literal"})

HUGO_SHORTCODE = "Hugo shortcode"
INCLUDE = "include"
TEMPLATE_TAG = "template tag"
TEMPLATE_EXPRESSION = "template expression"
MYST_DIRECTIVE = "MyST directive"
UNRESOLVED = "unresolved cross-reference"
"""The kinds of construct a page may lose, as ``docpilot index`` names them."""


class Targets(Protocol):
    """What a cross-reference names, known once every page of the folder is read."""

    def resolve(self, kind: str, target: str, page_id: str) -> str | None:
        """The page or section id that ``target`` names from ``page_id`` (``kind``: ``path`` or ``label``)."""

    def title(self, target_id: str) -> str | None:
        """The heading or page title a reader sees for a page or section id."""


@dataclass
class Rewritten:
    """A page's lines with the generators' syntax rewritten, and what went."""

    lines: list[str]
    """The page as plain Markdown, with link and label markers."""
    dropped: Counter = field(default_factory=Counter)
    """Kind → how many constructs of it went with nothing left of them."""
    references: int = 0
    """Cross-references read: the page needs the folder's ``Targets`` to resolve them."""


def may_hold_syntax(text: str) -> bool:
    """Tell whether a page may hold a construct of this module (a cheap test on its text)."""
    return "{" in text or ")=" in text


def rewrite(lines: list[str], *, mdx: bool = False, page_id: str = "", targets: Targets | None = None,
            values: Mapping[str, str] | None = None) -> Rewritten:
    """Rewrite a page's lines (front matter removed) into plain Markdown; see the module docstring.

    ``page_id`` places relative cross-references, ``targets`` resolves them (without
    it they keep their words and link nowhere), ``values`` are the page's front
    matter strings that ``{{ page.key }}`` shows.
    """
    reader = _Reader(lines, page_id, targets, values or {})
    reader.tokens = _MDX_TOKEN if mdx else _TOKEN
    reader.run()
    return Rewritten(lines=reader.out, dropped=reader.dropped, references=reader.references)


class _Closers:
    """Where each closer string next occurs at or after a position, searching each stretch of text once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, tuple[int, int]] = {}  # closer → (searched from, found at or -1)

    def after(self, closer: str, pos: int) -> int:
        start, at = self.found.get(closer, (-1, -1))
        if start >= 0 and start <= pos and (at < 0 or at >= pos):
            return at
        at = self.text.find(closer, pos)
        self.found[closer] = (pos, at)
        return at

    def pattern_after(self, pattern: re.Pattern[str], pos: int) -> re.Match[str] | None:
        key = pattern.pattern
        start, at = self.found.get(key, (-1, -1))
        if start >= 0 and start <= pos and at < 0:
            return None
        found = pattern.search(self.text, pos)
        self.found[key] = (pos, found.start() if found else -1)
        return found


class _Reader:
    """One pass over a page's lines: fences and directives as a stack, the rest line by line."""

    def __init__(self, lines: list[str], page_id: str, targets: Targets | None, values: Mapping[str, str]):
        self.lines = [_MARK.sub("", line) if _MARK.search(line) else line for line in lines]
        self.page_id = page_id
        self.targets = targets
        self.values = values
        self.out: list[str] = []
        self.dropped: Counter = Counter()
        self.references = 0
        self.fence: str | None = None  # an open code fence: copied verbatim
        self.stack: list[tuple[str, str, str]] = []  # open directives: (closing fence, body, fence written)
        self.options = False  # the directive's option lines may still come
        self.raw = False  # inside a {% raw %} (shown as code) or {% comment %} (dropped)
        self.raw_end: re.Pattern[str] = _ENDRAW
        self.label: str | None = None
        self.tokens = _TOKEN
        self.paired = {found.group(1) for line in self.lines if "{{" in line for found in _PAIRED.finditer(line)}
        self.paired_tags = {found.group(1) for line in self.lines if "{%" in line
                            for found in _PAIRED_TAG.finditer(line)}
        self._closers_at = _next_closers(self.lines)

    def run(self) -> None:
        i = 0
        while i < len(self.lines):
            i = self._line(i)

    def _line(self, i: int) -> int:
        line = self.lines[i]
        if self.raw:
            self._raw_line(line)
            return i + 1
        if self.fence is not None:
            self.out.append(line)
            if _closes(line, self.fence):
                self.fence = None
            return i + 1
        if self.stack and self._in_directive(line):
            return i + 1
        if self.label is not None and line.lstrip().startswith("#"):
            heading = _ATX.match(line)
            if heading:  # the label goes at the start of the heading it names
                line = self.lines[i] = f"{heading.group(1)}{LABEL_OPEN}{self.label}{LABEL_CLOSE}{heading.group(2)}"
                self.label = None
        if self._block(line):
            return i + 1
        if "{" not in line:
            self.out.append(line)
            return i + 1
        return self._inline_lines(i)

    def _in_directive(self, line: str) -> bool:
        """Handle a line inside an open directive: its options, its closer, a dropped body. True when done."""
        closing, body, written = self.stack[-1]
        if _directive_closes(line, closing):
            self.stack.pop()
            self.options = False
            self.out.append(written if body == "code" else "")
            return True
        if self.options:
            if _OPTION.match(line):
                return True
            self.options = False
        if body == "drop":
            return True
        if body == "code":
            self.out.append(line)
            return True
        return False

    def _block(self, line: str) -> bool:
        """Handle a line that opens or closes a block: a fence, a directive, a label, ``highlight``."""
        stripped = line.lstrip()
        first = stripped[:1]
        if first in ("`", "~"):
            opened = _FENCE_OPEN.match(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                directive = _DIRECTIVE_INFO.match(opened.group(2).strip())
                if directive:
                    self._open_directive(opened.group(1), directive.group(1), directive.group(2))
                else:
                    self.fence = opened.group(1)
                    self.out.append(line)
                return True
        elif first == ":":
            directive = _COLON_DIRECTIVE.match(line)
            if directive:
                self._open_directive(directive.group(1), directive.group(2), directive.group(3))
                return True
        elif first == "(":
            label = _LABEL.match(line)
            if label:
                self.label = label.group(1)
                return True
        elif first == "{" and stripped.startswith("{{") and "highlight" in line:
            code = _HIGHLIGHT.match(line)
            if code:
                self.out.append("```" + code.group(1))
                self.stack.append(("{{/highlight}}", "code", "```"))
                return True
        return False

    def _open_directive(self, fence: str, name: str, argument: str) -> None:
        self.options = True
        if name in _CODE_DIRECTIVES and name != "eval-rst":
            written = fence if fence[0] == "`" else "```"
            language = argument.split()[0] if argument.split() else ("" if name.startswith("code") else name)
            self.out.append(written + language)
            self.stack.append((fence, "code", written))
            return
        if name in _INCLUDE_DIRECTIVES or name in _DROPPED_DIRECTIVES:
            self.dropped[INCLUDE if name in _INCLUDE_DIRECTIVES else MYST_DIRECTIVE] += 1
            self.stack.append((fence, "drop", ""))
            return
        # An admonition, tabs, a card: the kind goes, a title it has stays (a figure's is its image's path).
        self.out.append("")
        if argument and name != "figure":
            self.out.append(self._text(argument))
        self.stack.append((fence, "text", ""))

    def _raw_line(self, line: str) -> None:
        end = self.raw_end.search(line)
        keep = self.raw_end is _ENDRAW
        if end is None:
            if keep:
                self.out.append(line)
            return
        self.raw = False
        if keep:
            if line[: end.start()].strip():
                self.out.append(line[: end.start()])
            self.out.append(RAW_FENCE)
        rest = line[end.end() :]
        if rest.strip():
            self._emit(self._text(rest).split("\n"))

    def _inline_lines(self, i: int) -> int:
        """Rewrite line ``i``, joined to the lines after it when a construct it opens closes there."""
        line = self.lines[i]
        end = i + 1
        text = self._inline(line)
        while isinstance(text, _Unclosed):
            closer_line = self._closer_within(end, text.closer)
            # The lines joined to line i stay within JOIN_LINES of it in all: a chain of openers,
            # each closed a few lines on, would otherwise join the whole page, once per opener.
            if closer_line is not None and closer_line >= i + JOIN_LINES:
                closer_line = None
            if closer_line is None:
                text = self._give_up(text)
                break
            line = text.done + text.rest + " " + " ".join(s.strip() for s in self.lines[end : closer_line + 1])
            end = closer_line + 1
            text = self._inline(line, skip=len(text.done))
        self._emit(text.split("\n"))
        return end

    def _emit(self, lines: list[str]) -> None:
        """Add rewritten lines; one that opens a fence once its constructs are gone opens it for the reader too."""
        for line in lines:
            self.out.append(line)
            if self.raw or "`" not in line and "~" not in line:
                continue
            if self.fence is not None:
                if _closes(line, self.fence):
                    self.fence = None
                continue
            opened = _FENCE_OPEN.match(line)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                self.fence = opened.group(1)

    def _text(self, line: str) -> str:
        """A piece of one line rewritten, with no lines joined to it."""
        text = self._inline(line) if "{" in line else line
        return self._give_up(text) if isinstance(text, _Unclosed) else text

    def _give_up(self, unclosed: _Unclosed) -> str:
        """No closer before a blank line: the opener and what follows it on the line go."""
        if unclosed.kind:
            self.dropped[unclosed.kind] += 1
        return unclosed.done

    def _closer_within(self, start: int, closer: str) -> int | None:
        """The first line from ``start`` holding ``closer``, when it comes within JOIN_LINES and before a blank line."""
        blanks, found = self._closers_at
        limit = min(start + JOIN_LINES, len(self.lines))
        positions = found[closer]
        k = bisect_right(positions, start - 1)
        if k == len(positions) or positions[k] >= limit:
            return None
        b = bisect_right(blanks, start - 1)
        if b < len(blanks) and blanks[b] < positions[k]:
            return None
        return positions[k]

    def _inline(self, line: str, skip: int = 0) -> str | _Unclosed:
        """One line with its constructs rewritten; an ``_Unclosed`` when one opens and does not close on it."""
        closers = _Closers(line)
        runs = _Runs(line) if "`" in line else None
        out: list[str] = [line[:skip]]
        pos = skip
        while True:
            found = self.tokens.search(line, pos)
            if found is None:
                break
            start, token = found.start(), found.group()
            if token[0] == "`":
                end = runs.close(start) if runs else None
                out.append(line[pos : (end if end is not None else found.end())])
                pos = end if end is not None else found.end()
                continue
            out.append(line[pos:start])
            if token[1] not in "{%#":  # a MyST role
                end = runs.close(found.end()) if runs else None
                if end is None:
                    out.append(token)
                    pos = found.end()
                    continue
                width = len(_BACKTICKS.match(line, found.end()).group())
                out.append(self._role(token[1:-1], line[found.end() + width : end - width]))
                pos = end
                continue
            closer = _CLOSER.get(token, "}}")
            end = closers.after(closer, found.end())
            if end < 0:
                if token == "{#" and not line.startswith((" ", "-", "\t"), found.end()) and found.end() < len(line):
                    out.append(token)  # '{#id}' is a heading's id, not a comment
                    pos = found.end()
                    continue
                return _Unclosed("".join(out), line[start:], closer[-2:], _UNCLOSED_KIND.get(token, HUGO_SHORTCODE))
            inner = line[found.end() : end]
            after = end + len(closer)
            if token == "{#":
                pos = after
                continue
            if token == "{%":
                shown, after = self._tag(inner, line, after, closers, out)
            elif token[-1] in "<%":
                shown, after = self._shortcode(inner, line, after, out)
            else:
                shown = self._expression(inner)
            if not shown and line.startswith("`", after) and next((p for p in reversed(out) if p), "").endswith("`"):
                shown = " "  # two backtick runs would run together into one
            out.append(shown)
            pos = after
        out.append(line[pos:])
        return "".join(out)

    def _shortcode(self, inner: str, line: str, after: int, out: list[str]) -> tuple[str, int]:
        body = inner.strip().strip("-").strip()
        if body.startswith("/*") and body.endswith("*/"):  # {{</* name */>}}: the shortcode shown as written
            return f"`{{{{< {body[2:-2].strip()} >}}}}`", after
        words = body.split(None, 1)
        if not words or words[0].startswith("/"):
            return "", after
        name, args = words[0], _args(words[1] if len(words) > 1 else "")
        if name in _XREF_SHORTCODES:
            target = args.get("path") or args.get(0, "")
            return self._link(out, line, after, "path", target, None)
        if name in self.paired:
            return _kept_line(args, _KEPT_ARGS + ((0,) if name == "tab" else ())), after
        if name in _FIGURE_SHORTCODES:
            shown = _kept_line(args, _FIGURE_ARGS)
            if shown:
                return shown, after
        self.dropped[HUGO_SHORTCODE] += 1
        return "", after

    def _tag(self, inner: str, line: str, after: int, closers: _Closers, out: list[str]) -> tuple[str, int]:
        body = inner.strip().strip("-").strip()
        words = body.split(None, 1)
        name = words[0] if words else ""
        rest = words[1] if len(words) > 1 else ""
        if name in ("raw", "comment"):
            pattern = _ENDRAW if name == "raw" else _ENDCOMMENT
            end = closers.pattern_after(pattern, after)
            if end is not None:
                shown = line[after : end.start()]
                if name != "raw" or not shown.strip():
                    return "", end.end()
                # A backtick written right against the tags would join the span's delimiters: a space keeps them apart.
                before = " " if out and out[-1].endswith("`") else ""
                after_it = " " if line[end.end() : end.end() + 1] == "`" else ""
                return before + _code_span(shown) + after_it, end.end()
            self.raw, self.raw_end = True, pattern
            rest_of_line = line[after:]
            if name == "raw":
                return f"\n{RAW_FENCE}" + ("\n" + rest_of_line if rest_of_line.strip() else ""), len(line)
            return "", len(line)
        if name in _INCLUDE_TAGS:
            self.dropped[INCLUDE] += 1
            return "", after
        if name in _LINK_TAGS:
            return self._link(out, line, after, "path", rest.strip().strip("\"'"), None)
        if name.startswith(("end", "/")):
            return "", after
        if name in _WRAPPER_TAGS or name in self.paired_tags:
            return _kept_line(_args(rest), _KEPT_ARGS), after
        if name not in _CONTINUATION_TAGS:
            self.dropped[TEMPLATE_TAG] += 1
        return "", after

    def _expression(self, inner: str) -> str:
        body = inner.strip().strip("-").strip()
        if body.startswith("page.") and body[5:] in self.values:
            return self.values[body[5:]]
        self.dropped[TEMPLATE_EXPRESSION] += 1
        return ""

    def _role(self, name: str, content: str) -> str:
        text, target = _role_parts(content)
        if name in _XREF_ROLES:
            kind = "path" if name == "doc" else "label"
            return self._link([], "", 0, kind, target.lstrip("~"), text)[0]
        text = text or content
        if ":" in name:  # a domain role ({py:func}): code; '~' asks for the last part of the name only
            return _code_span(text.lstrip("~").rsplit(".", 1)[-1] if text.startswith("~") else text)
        if name in _CODE_ROLES:
            return _code_span(text)
        return self._text(text)  # {term}, {abbr}, {guilabel}: their words, as prose

    def _link(self, out: list[str], line: str, after: int, kind: str, target: str,
              text: str | None) -> tuple[str, int]:
        """A cross-reference: the words a reader sees and the marker of what it names.

        Inside a Markdown link's parentheses (``[words]({{< relref "x" >}})``) the
        link's words stay and the marker follows the link.
        """
        self.references += 1
        resolved = self.targets.resolve(kind, target, self.page_id) if self.targets and target else None
        if self.targets is not None and resolved is None:
            self.dropped[UNRESOLVED] += 1
        marker = f"{LINK_OPEN}{resolved}{LINK_CLOSE}" if resolved else ""
        in_link = bool(out) and out[-1].endswith("](") and line.startswith(")", after)
        if in_link:
            return "#)" + marker, after + 1
        if not text:
            text = (self.targets.title(resolved) if self.targets and resolved else None) or _words_of(target)
        return (self._text(text) if "{" in text else text) + marker, after


@dataclass(frozen=True, slots=True)
class _Unclosed:
    done: str
    """The line rewritten up to the opener."""
    rest: str
    """The line from the opener on, as written."""
    closer: str
    """The closer that would end it: ``}}``, ``%}`` or ``#}``."""
    kind: str
    """What it is, for the count of what went."""


class _Runs:
    """A line's backtick runs, so a run finds the next run of its width at once."""

    def __init__(self, line: str) -> None:
        self.spans = {found.start(): found.end() for found in _BACKTICKS.finditer(line)}
        self.of_width: dict[int, list[int]] = {}
        for start, end in self.spans.items():
            self.of_width.setdefault(end - start, []).append(start)

    def close(self, start: int) -> int | None:
        """Where the code span opened by the run at ``start`` ends, or None when no run closes it."""
        end = self.spans.get(start)
        if end is None:
            return None
        same = self.of_width[end - start]
        k = bisect_right(same, start)
        return self.spans[same[k]] if k < len(same) else None


def _next_closers(lines: list[str]) -> tuple[list[int], dict[str, list[int]]]:
    """The blank lines' numbers, and for each closer the numbers of the lines holding it, in order."""
    blanks: list[int] = []
    found: dict[str, list[int]] = {"}}": [], "%}": [], "#}": []}
    for n, line in enumerate(lines):
        if not line.strip():
            blanks.append(n)
            continue
        if "}" in line:
            for closer, at in found.items():
                if closer in line:
                    at.append(n)
    return blanks, found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def _directive_closes(line: str, closing: str) -> bool:
    if closing == "{{/highlight}}":
        return bool(_HIGHLIGHT_END.match(line)) if "highlight" in line else False
    return _closes(line, closing)


def _args(text: str) -> dict:
    """A shortcode's or tag's arguments: ``key="value"`` by key, positional ones by their place."""
    args: dict = {}
    place = 0
    for found in _ARG.finditer(text):
        if found.group(1):
            args[found.group(1)] = next(g for g in found.groups()[1:4] if g is not None)
        else:
            args[place] = next(g for g in found.groups()[4:] if g is not None)
            place += 1
    return args


def _kept_line(args: dict, keys: tuple) -> str:
    """The values of the arguments a reader sees as text (a tab's title), joined."""
    return " ".join(str(args[key]) for key in keys if args.get(key))


def _code_span(text: str) -> str:
    """Text as a code span: a backtick run longer than any inside it, as CommonMark asks."""
    if "`" not in text:
        return f"`{text}`"
    ticks = "`" * (max(len(run) for run in _BACKTICKS.findall(text)) + 1)
    return f"{ticks} {text} {ticks}"


def _role_parts(content: str) -> tuple[str | None, str]:
    """A role's ``text <target>``: its text (None when it has none) and its target."""
    opened = content.rfind("<")
    if content.endswith(">") and opened >= 0 and content[:opened].strip():
        return content[:opened].strip(), content[opened + 1 : -1].strip()
    return None, content.strip()


def _words_of(target: str) -> str:
    """The words a bare target shows when nothing better is known: its last part, dashes as spaces."""
    path, _, anchor = target.partition("#")
    tail = anchor or posixpath.basename(path.rstrip("/")).rsplit(".", 1)[0]
    return tail.replace("-", " ").replace("_", " ").strip() or target
