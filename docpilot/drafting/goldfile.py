"""The one writer of a golden set: records appended, gold entries replaced, every other byte kept.

A golden set is a file people write and comment by hand. A YAML round trip keeps most
of it but not all (blank lines, a quoting style, a long line's wrapping), so the file
is edited as text: ``append_records`` adds records after the last one, at the
indentation the file's own records use (``golden accept``); ``replace_gold`` swaps
gold entries where they are written, in the quoting they are written in, leaving every
other byte as it was (``golden check --fix``). Both end in ``write_checked``: the new
text is read back as a golden set and must hold what the edit meant before it replaces
the file, whose mode, byte-order mark and line ends it keeps.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from docpilot.errors import InputError
from docpilot.golden.draft import record_lines
from docpilot.golden.loading import read_golden
from docpilot.reports.output import write_atomically
from docpilot.schema import GoldenRecord, turn_id
from docpilot.userfiles.intake import GOLDEN_SET, read_bytes, read_text

Moves = Mapping[str, Mapping[str, str]]
"""Record id → {gold entry as written → the entry to write instead}."""

_BOM = "\ufeff"
_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./#()-]*$")
"""A gold entry YAML reads back unchanged without quotes."""
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_CSV_ENTRY = re.compile(r'[^;"]+')
"""One entry of a CSV list cell, between its ``;`` separators and the cell's quotes."""


def append_records(path: Path, records: list[dict], header: str) -> None:
    """Append ``records`` (fields in order) to the golden set at ``path``, or start it with ``header``."""
    text = _read(path) if path.exists() else header
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        added = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    elif suffix in (".yaml", ".yml"):
        indent = _item_indent(text, path)
        added = "\n" + "\n".join(line for r in records for line in record_lines(r, indent))
    else:
        raise InputError("accept appends to a YAML or JSONL golden set only", path=path,
                         hint="convert the set to YAML, or copy the drafts' fields into the file by hand")
    if text and not text.endswith("\n"):
        text += "\n"
    write_checked(path, text + added)


def replace_gold(path: Path, moves: Moves) -> int:
    """Write each moved gold entry of ``moves`` over the old one in the file at ``path``; how many were written.

    Only the entries' own characters change: their quotes, the file's comments, blank
    lines, order and line ends stay as written.
    """
    text = _read(path)
    suffix = path.suffix.lower()
    spans = (_jsonl_spans if suffix in (".jsonl", ".ndjson") else _csv_spans if suffix == ".csv"
             else _yaml_spans)(text, moves)
    for start, end, written in sorted(spans, reverse=True):
        text = text[:start] + written + text[end:]
    if spans:
        write_checked(path, text, expect=lambda records: _moved_as_meant(records, moves, path))
    return len(spans)


def write_checked(path: Path, text: str, *, expect: Callable[[list[GoldenRecord]], None] | None = None) -> None:
    """Check the new text as a golden set (and, with ``expect``, what it holds), then replace the file with it.

    The file keeps its mode and a byte-order mark it had; nothing is written when the
    check fails, and the error names the line of the new text at fault.
    """
    with tempfile.TemporaryDirectory(prefix="docpilot-golden-") as folder:
        trial = Path(folder) / path.name
        trial.write_text(text, encoding="utf-8", newline="")
        records = read_golden(trial).records  # raises naming the trial's line: the text written is at fault
        if expect is not None:
            expect(records)
    mode = os.stat(path).st_mode & 0o7777 if path.exists() else None
    bom = _BOM if path.exists() and read_bytes(path, GOLDEN_SET).startswith(b"\xef\xbb\xbf") else ""
    write_atomically(path, bom + text, "golden set", mode=mode)


def _read(path: Path) -> str:
    """The file's text exactly as stored (line ends kept), without a byte-order mark."""
    return read_text(path, GOLDEN_SET)


def _moved_as_meant(records: list[GoldenRecord], moves: Moves, path: Path) -> None:
    for record in records:
        stale = set(moves.get(record.id, {})) & set(record.gold)
        if stale:
            raise InputError(f"rewriting gold entry {sorted(stale)[0]!r} left it in the file", path=path,
                             record=record.id, hint="edit the entry by hand; `docpilot golden check` names its new id")


# YAML ------------------------------------------------------------------------------


def _records_node(text: str) -> yaml.Node | None:
    """The sequence node of the file's records (a top-level list, or the last ``records:``)."""
    root = yaml.compose(text)
    if isinstance(root, yaml.MappingNode):
        root = next((v for k, v in reversed(root.value) if isinstance(k, yaml.ScalarNode) and k.value == "records"),
                    None)
    return root if isinstance(root, yaml.SequenceNode) else None


def _yaml_spans(text: str, moves: Moves) -> list[tuple[int, int, str]]:
    spans = []
    records = _records_node(text)
    for item in records.value if records is not None else []:
        fields = _yaml_fields(item)
        key = fields.get("id")
        if not isinstance(key, yaml.ScalarNode):
            continue
        turns = fields.get("turns")
        if isinstance(turns, yaml.SequenceNode):  # a conversation: each turn's gold, by the turn's id
            for number, turn in enumerate(turns.value, start=1):
                spans += _yaml_gold_spans(_yaml_fields(turn), moves.get(turn_id(str(key.value), number)))
        else:
            spans += _yaml_gold_spans(fields, moves.get(str(key.value)))
    return spans


def _yaml_fields(node: yaml.Node) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _yaml_gold_spans(fields: dict[str, yaml.Node], wanted: Mapping[str, str] | None) -> list[tuple[int, int, str]]:
    gold = fields.get("gold")
    if not wanted or not isinstance(gold, yaml.SequenceNode):
        return []
    return [(node.start_mark.index, node.end_mark.index, _yaml_scalar(wanted[node.value], node))
            for node in gold.value if isinstance(node, yaml.ScalarNode) and node.value in wanted]


def _yaml_scalar(value: str, node: yaml.ScalarNode) -> str:
    """``value`` written in the quoting the old entry had (plain when it reads back unchanged)."""
    if node.style == "'":
        return "'" + value.replace("'", "''") + "'"
    if node.style is None and _PLAIN.match(value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False)


def _item_indent(text: str, path: Path) -> str:
    """The white space before the ``- `` of the file's records (none for a top-level list)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        root = None  # read_golden reported it already; unreachable for a checked file
    if isinstance(root, yaml.MappingNode):
        root = next((v for k, v in root.value if k.value == "records"), None)
    if root is None:
        return ""
    if not isinstance(root, yaml.SequenceNode) or root.flow_style:
        raise InputError("the records are written as one flow list ([...]), which cannot be appended to",
                         path=path, hint="write the records as a block list, each starting with '- id: ...'")
    if not root.value:
        return ""
    line = text.split("\n")[root.value[0].start_mark.line]
    found = re.match(r"^(\s*)-\s", line)
    return found.group(1) if found else ""


# JSONL -----------------------------------------------------------------------------


def _jsonl_spans(text: str, moves: Moves) -> list[tuple[int, int, str]]:
    spans = []
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            record = json.loads(line)
            record_id = str(record.get("id")) if isinstance(record, dict) else None
            for start, end, value, turn in _json_gold_strings(line) if record_id is not None else []:
                wanted = moves.get(record_id if turn is None else turn_id(record_id, turn), {})
                if value in wanted:
                    spans.append((offset + start, offset + end, json.dumps(wanted[value], ensure_ascii=False)))
        offset += len(line) + 1
    return spans


def _json_gold_strings(line: str) -> list[tuple[int, int, str, int | None]]:
    """The strings of the ``gold`` lists of one JSON object, each with its span in the line and its turn.

    The object's own ``gold`` gives turn None; a conversation's ``turns[n].gold`` gives turn n + 1.
    """
    found = []
    frames: list[dict] = []  # the open containers: {"kind": "{" or "[", "key": last key, "index": item number}
    position = 0
    while position < len(line):
        char = line[position]
        if char == '"':
            token = _JSON_STRING.match(line, position)
            end = token.end()
            value = json.loads(token.group())
            top = frames[-1] if frames else None
            if top is not None and top["kind"] == "{" and top["want_key"]:
                top.update(key=value, want_key=False)
            else:
                turn = _gold_turn([frame["key"] if frame["kind"] == "{" else frame["index"] for frame in frames])
                if turn is not False:
                    found.append((position, end, value, turn))
            position = end
            continue
        if char in "[{":
            frames.append({"kind": char, "key": None, "index": 0, "want_key": char == "{"})
        elif char in "]}":
            frames.pop()
        elif char == "," and frames:
            frames[-1]["index"] += 1
            frames[-1]["want_key"] = frames[-1]["kind"] == "{"
        position += 1
    return found


def _gold_turn(path: list) -> int | None | bool:
    """Which turn's gold a string at ``path`` (keys and item numbers from the root) is in: None for the record's
    own, a turn's number, or False when it is no gold entry."""
    if len(path) == 2 and path[0] == "gold":
        return None
    if len(path) == 4 and path[0] == "turns" and isinstance(path[1], int) and path[2] == "gold":
        return path[1] + 1
    return False


# CSV -------------------------------------------------------------------------------


def _csv_cells(text: str) -> list[list[tuple[int, int]]]:
    """Each row's cells as spans of ``text`` (quotes included), by the rules spreadsheets write CSV with."""
    rows: list[list[tuple[int, int]]] = []
    row: list[tuple[int, int]] = []
    start, quoted, position = 0, False, 0
    while position < len(text):
        char = text[position]
        if quoted:
            if char == '"' and text[position + 1:position + 2] == '"':
                position += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in ",\n":
            end = position - 1 if char == "\n" and text[position - 1:position] == "\r" else position
            row.append((start, end))
            if char == "\n":
                rows.append(row)
                row = []
            start = position + 1
        position += 1
    if start < len(text) or row:
        rows.append([*row, (start, len(text))])
    return rows


def _cell_value(raw: str) -> str:
    raw = raw.strip()
    return raw[1:-1].replace('""', '"') if len(raw) > 1 and raw[0] == raw[-1] == '"' else raw


def _csv_spans(text: str, moves: Moves) -> list[tuple[int, int, str]]:
    rows = _csv_cells(text)
    names = [_cell_value(text[s:e]) for s, e in rows[0]] if rows else []
    turn_at = (names.index("conversation"), names.index("turn")) if {"conversation", "turn"} <= set(names) else None
    if "gold" not in names or ("id" not in names and turn_at is None):
        return []
    id_at, gold_at = names.index("id") if "id" in names else None, names.index("gold")
    spans = []
    for row in rows[1:]:
        wanted = moves.get(_csv_row_id(text, row, id_at, turn_at)) if len(row) > gold_at else None
        if not wanted:
            continue
        start, end = row[gold_at]
        quoted = text[start:end].strip().startswith('"')
        for part in _CSV_ENTRY.finditer(text, start, end):
            core = part.group().strip()
            if core in wanted:
                at = part.start() + part.group().index(core)
                new = wanted[core]
                if not quoted and set(new) & set(',"\n'):
                    new = '"' + new.replace('"', '""') + '"'  # a cell of one entry; ids hold no such characters
                spans.append((at, at + len(core), new))
    return spans


def _csv_row_id(text: str, row: list[tuple[int, int]], id_at: int | None,
                turn_at: tuple[int, int] | None) -> str | None:
    """The id of a row's record: its id cell, or for a turn's row ``<conversation>/<turn>``."""
    if turn_at is not None and len(row) > max(turn_at):
        conversation = _cell_value(text[slice(*row[turn_at[0]])])
        if conversation:
            return f"{conversation}/{_cell_value(text[slice(*row[turn_at[1]])])}"
    return _cell_value(text[slice(*row[id_at])]) if id_at is not None and len(row) > id_at else None
