"""Files people write by hand — golden sets, probe files, configs — read so errors can point into them.

The bytes come from ``docpilot.userfiles.intake`` (regular files only, within a size cap)
and must be UTF-8; YAML is composed into nodes first, so every value can be traced
back to its line; JSONL is read one line at a time. Validation errors from pydantic
are turned into sentences that name the bad value and say what to write instead.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from docpilot.errors import InputError


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A safe loader that keeps `yes`, `no`, `on`, `off`, dates and `=` as text.

    It parses with libyaml where PyYAML was built with it: much faster than the pure
    Python parser, with the same line numbers.

    YAML 1.1 turns these into booleans, dates or an unconstructible tag, so
    `question: No`, `mode: off` or `id: 2024-05-01` would fail for no reason a
    person could guess. Only `true` and `false` are booleans, as in YAML 1.2.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if not tag.endswith((":bool", ":timestamp", ":value"))]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


_MAX_LISTED = 20


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file someone wrote: where it is, what it is, and how to fix it."""

    message: str
    """What is wrong, naming the bad value."""
    hint: str
    """What to write instead."""
    path: Path | None = None
    """The file, when the problem is in one."""
    line: int | None = None
    """The 1-based line, when known."""
    record: str | None = None
    """The record's id, when the problem is in a record that has one."""

    def where(self) -> str:
        """`file:line, record 'id'`, leaving out what is unknown."""
        parts = [f"{self.path}{f':{self.line}' if self.line else ''}" if self.path is not None else ""]
        parts.append(f"record {self.record!r}" if self.record is not None else "")
        return ", ".join(part for part in parts if part)


def raise_all(problems: Sequence[Problem], *, error: type[InputError] = InputError) -> None:
    """Raise one error for every problem: the problem itself when there is one, else a list of them."""
    if not problems:
        return
    if len(problems) == 1:
        only = problems[0]
        raise error(only.message, path=only.path, line=only.line, record=only.record, hint=only.hint)
    lines = [f"{len(problems)} problems:"]
    for problem in problems[:_MAX_LISTED]:
        where = problem.where()
        lines += [f"  {where}: {problem.message}" if where else f"  {problem.message}", f"    fix: {problem.hint}"]
    if len(problems) > _MAX_LISTED:
        lines.append(f"  and {len(problems) - _MAX_LISTED} more")
    paths = {problem.path for problem in problems}
    raise error("\n".join(lines), path=paths.pop() if len(paths) == 1 else None)


MAX_ALIAS_VALUES = 100_000
"""Most values YAML aliases (``*name``) may add to a file once expanded; more is refused."""


def parse_yaml(text: str, path: Path, *, error: type[InputError] = InputError) -> tuple[yaml.Node | None, Any]:
    """The document's root node (for line numbers) and its value; (None, None) when it is empty.

    Aliases are counted before the document is built: nested ones multiply (541 bytes
    can stand for billions of values), so past ``MAX_ALIAS_VALUES`` added values the
    file is refused instead of expanded.
    """
    loader = None
    try:
        loader = _Loader(text)  # the reader already refuses control characters here
        root = loader.get_single_node()
        aliased = "*" in text  # no alias is written without one
        if root is not None and aliased:
            check_aliases(root, path, error)
        if root is None:
            return None, None
        # Aliases share nodes, and PyYAML's constructor gives each shared node one object.
        return root, loader.construct_document(root) if aliased else _value(loader, root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "the place shown"
        raise error(
            f"YAML syntax error: {problem}",
            path=path,
            line=mark.line + 1 if mark else None,
            hint=f"fix the YAML at {where}: check the indentation, and quote text that holds ': ' or ' #'",
        ) from None
    except yaml.YAMLError as exc:
        position = getattr(exc, "position", None)
        line = text.count("\n", 0, position) + 1 if isinstance(position, int) else None
        raise error(f"YAML cannot be read: {exc}", path=path, line=line,
                    hint="remove control characters and save the file as plain UTF-8 text") from None
    except (ValueError, TypeError, OverflowError) as exc:
        hint = "quote the value so it is read as text"
        raise error(f"a YAML value cannot be read: {exc}", path=path, hint=hint) from None
    except RecursionError:
        raise error("YAML is nested too deeply to read", path=path, hint="flatten the nesting") from None
    finally:
        if loader is not None:
            loader.dispose()


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class _Unusual(Exception):
    """A node that only PyYAML's own constructor builds: a merge key, a tag of its own, a key that is no scalar."""


def _value(loader: yaml.BaseLoader, root: yaml.Node) -> Any:
    """The document's value, as ``loader.construct_document`` builds it.

    Lists, mappings and strings, which are nearly all a file people write holds, are
    built here directly: PyYAML's constructor spends more time on its own machinery
    than on them. Other scalars (numbers, true, false, null) go through PyYAML's
    constructor, and a document with anything else (a merge key, a tag, a mapping used
    as a key) is built by it whole, as is one with aliases (the caller's choice).
    """
    try:
        return _build(loader, root)
    except _Unusual:
        return loader.construct_document(root)


def _build(loader: yaml.BaseLoader, node: yaml.Node) -> Any:
    kind = type(node)
    if kind is yaml.ScalarNode:
        return node.value if node.tag == _STR else loader.construct_object(node)
    if kind is yaml.SequenceNode and node.tag == _SEQ:
        return [_build(loader, item) for item in node.value]
    if kind is yaml.MappingNode and node.tag == _MAP:
        mapping = {}
        for key, value in node.value:
            if type(key) is not yaml.ScalarNode or key.tag not in (_STR, "tag:yaml.org,2002:int",
                                                                   "tag:yaml.org,2002:float",
                                                                   "tag:yaml.org,2002:bool",
                                                                   "tag:yaml.org,2002:null"):
                raise _Unusual
            mapping[_build(loader, key)] = _build(loader, value)
        return mapping
    raise _Unusual


def check_aliases(root: yaml.Node, path: Path | str, error: type[InputError] = InputError) -> None:
    """Refuse a document whose aliases expand to more than ``MAX_ALIAS_VALUES`` extra values."""
    sizes: dict[int, int] = {}  # id(node) -> values it stands for, expanded
    distinct = 0
    # Depth-first without recursion: a deep document must not hit the interpreter's limit.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] - distinct > MAX_ALIAS_VALUES:
                break
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise error("a YAML alias refers to its own anchor", path=path, line=line_of(node),
                        hint="remove the alias that points back into the value it belongs to")
        distinct += 1
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    expanded = sizes.get(id(root), 0)
    if expanded - distinct > MAX_ALIAS_VALUES or not sizes.get(id(root)):
        raise error(
            f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values more than the file writes out",
            path=path,
            hint="write the values out instead of nesting aliases (*name) inside anchored values (&name)",
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def parse_scalar(text: str) -> Any:
    """A value written the way YAML reads it (`8`, `0.5`, `true`, `null`); text YAML cannot read stays text."""
    try:
        loader = _Loader(text)
    except yaml.YAMLError:
        return text
    try:
        return loader.get_single_data()
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return text
    finally:
        loader.dispose()


def parse_jsonl(text: str, path: Path, *, error: type[InputError] = InputError) -> list[tuple[int, Any, list[str]]]:
    """Each non-blank line as (line number, value, keys written twice in it)."""
    rows = []
    repeated: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        repeated.extend(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        return dict(pairs)

    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        repeated.clear()
        try:
            value = json.loads(line, object_pairs_hook=pairs_hook)
        except json.JSONDecodeError as exc:
            raise error(
                f"JSON syntax error: {exc.msg} at column {exc.colno}",
                path=path,
                line=number,
                hint='each line holds one complete JSON object, such as {"id": "q1", "question": "..."}; '
                "an object may not span lines",
            ) from None
        except RecursionError:
            hint = "flatten the nesting"
            raise error("JSON is nested too deeply to read", path=path, line=number, hint=hint) from None
        rows.append((number, value, list(repeated)))
    return rows


def line_of(node: yaml.Node) -> int:
    """The 1-based line a node starts on."""
    return node.start_mark.line + 1


def mapping_entries(node: yaml.Node | None) -> list[tuple[str, yaml.Node, int]]:
    """A mapping node's own entries as (key, value node, key line); merged-in keys are left out.

    Merged keys (`<<: *anchor`) are spliced in while the document is built; their
    nodes sit outside this mapping's span, which is how they are told apart.
    """
    if not isinstance(node, yaml.MappingNode):
        return []
    start, end = node.start_mark.index, node.end_mark.index
    return [
        (key.value, value, line_of(key))
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode) and key.value != "<<" and start <= key.start_mark.index <= end
    ]


def repeated_keys(node: yaml.Node | None) -> list[tuple[str, int]]:
    """Keys a mapping node holds more than once, with the line of each repeat."""
    seen: set[str] = set()
    repeats = []
    for key, _, line in mapping_entries(node):
        if key in seen:
            repeats.append((key, line))
        seen.add(key)
    return repeats


def explain(error: Any, name: str, *, numbers: str | None = None, example: str = "") -> tuple[str, str]:
    """One pydantic error as a sentence naming the bad value, and the fix; ``name`` names the field.

    ``numbers`` is the field's whole range in words, when it takes a number (`a finite
    number > 0`): a wrong number is then told what the field takes, not only which one
    bound it broke, and ``example`` (`such as 1.2, the default`) ends the fix.
    """
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if numbers is not None and kind in _NUMBER_ERRORS:
        return f"{name} must be {numbers}, got {_got(value)}", f"write {numbers}" + (f", {example}" if example else "")
    if kind == "missing":
        return f"{name} is missing", f"add {name}"
    if kind == "string_too_short":
        return f"{name} is empty", f"write the {name}"
    if kind == "string_too_long":
        limit = ctx.get("max_length")
        length = len(value) if isinstance(value, str) else "too many"
        return f"{name} is {length} characters; the limit is {limit}", f"shorten the {name} to {limit} characters"
    if kind in ("literal_error", "enum"):
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        listed = ", ".join(choices)
        return f"{name} is {describe(value)}, which is not one of: {listed}", f"use one of: {listed}"
    for kinds, wanted, fix in _EXPECTED:
        if kind in kinds:
            bound = next((f"{word} {ctx[key]}" for key, word in _BOUNDS if key in ctx), "")
            return f"{name} must be {wanted or bound}, not {describe(value)}", fix.format(bound=bound)
    if kind == "recursion_loop":
        return f"{name} refers to itself", "remove the YAML alias that points back at its own anchor"
    return f"{name}: {error['msg'].rstrip('.').lower()} (got {describe(value)})", "correct the value"


_NUMBER_ERRORS = frozenset({
    "int_type", "int_parsing", "int_from_float", "float_type", "float_parsing", "finite_number",
    "greater_than_equal", "greater_than", "less_than_equal", "less_than", "bool_type",
})


def _got(value: Any) -> str:
    """A bad value as short as it can be said: `nan`, `-1`, `true`, `null`, or its kind and value for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return show(value)
    return "null" if value is None else describe(value)


_BOUNDS = (("ge", "at least"), ("gt", "greater than"), ("le", "at most"), ("lt", "less than"))
_EXPECTED: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("string_type", "string_unicode"), "text", "put the value in quotes so it is read as text"),
    (("list_type", "tuple_type", "set_type"), "a list", "write a list such as [a, b]"),
    (("dict_type", "model_type", "model_attributes_type"), "a mapping", "write `key: value` lines indented under it"),
    (("int_type", "int_parsing", "int_from_float"), "a whole number", "write a whole number such as 8"),
    (("float_type", "float_parsing", "finite_number"), "a number", "write a number such as 0.5"),
    (("bool_type", "bool_parsing"), "true or false", "write true or false"),
    (("greater_than_equal", "greater_than", "less_than_equal", "less_than"), "", "use a value that is {bound}"),
)


def describe(value: Any) -> str:
    """A value as a person would name it: its kind, then the value, shortened."""
    if value is None:
        return "nothing (null)"
    kinds = {dict: "a mapping", list: "a list", str: "text", bool: "true/false", int: "the number", float: "the number"}
    return f"{kinds.get(type(value), 'a ' + type(value).__name__)} {show(value)}"


def show(value: Any, limit: int = 60) -> str:
    """A value's repr, shortened to fit in one line of a message.

    Only as much of the value is looked at as the line can show: a repr built whole
    first would cost the value's full size, gigabytes for an expanded alias bomb.
    """
    shown = _bounded_repr(value, limit + 1)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _bounded_repr(value: Any, budget: int) -> str:
    """The start of ``repr(value)``, at least ``budget`` characters of it when it is that long."""
    if isinstance(value, str):
        return repr(value[:budget])[: budget + 2]
    if isinstance(value, (list, tuple)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        parts, used = [], 1
        for item in value:
            if used > budget:
                break
            part = _bounded_repr(item, budget - used)
            parts.append(part)
            used += len(part) + 2
        return opening + ", ".join(parts) + ("" if used > budget else closing)
    if isinstance(value, dict):
        parts, used = [], 1
        for key, item in value.items():
            if used > budget:
                break
            part = f"{_bounded_repr(key, budget - used)}: {_bounded_repr(item, budget - used)}"
            parts.append(part)
            used += len(part) + 2
        return "{" + ", ".join(parts) + ("" if used > budget else "}")
    return repr(value)[: budget + 1]
