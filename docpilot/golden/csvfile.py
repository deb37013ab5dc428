"""Golden sets kept as spreadsheets: a CSV file read to the same records a YAML file gives.

The first row names the fields (``id,question,gold,gold_answer,...``); every later row
is one record. A cell of a list field (``gold``, ``identifiers``, ``scope``, ``tags``)
holds its entries separated by ``;``. An empty cell means the field is not given, so
its default applies, exactly as when a YAML record leaves the key out: an empty
``gold`` makes a negative, an empty ``scope`` allows the whole corpus. Lines are
counted as the file has them, so a cell that spans lines (quoted) does not shift the
line numbers that errors name.

A conversation is written as rows, one a turn: the ``conversation`` column holds the
conversation's id and ``turn`` the turn's number, 1 to n in the order of the rows.
Each row holds its turn's question, gold and answer; ``split``, ``language`` and
``tags`` belong to the conversation, so the rows that fill them must agree (a row may
leave them empty). ``conversation_rows`` folds each conversation's rows into one
record with ``turns``, as a YAML file writes it.
"""

from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docpilot.userfiles.userfile import Problem

LIST_SEPARATOR = ";"
"""What separates the entries of a list field inside one cell."""


@dataclass(frozen=True)
class CsvRow:
    """One data row: its first line in the file, and its fields as a record would hold them."""

    line: int
    fields: dict[str, Any]
    turn_lines: tuple[int, ...] = ()
    """For a conversation: the line of each of its rows, one a turn."""


def parse_csv(text: str, path: Path, fields: Sequence[str], list_fields: Sequence[str]) -> tuple[
        list[CsvRow], list[Problem]]:
    """The rows of a CSV golden set, and the problems of its header and cell counts.

    ``fields`` are the record's field names; a header column that is none of them is
    one problem at line 1 (and its cells are ignored, so each record is not blamed for
    it). A row with more cells than the header has columns is a problem on its line;
    a row with fewer leaves the rest empty, as spreadsheets write it.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return [], [Problem(f"CSV syntax error in the header: {exc}", _QUOTING, path, 1)]
    if header is None:
        return [], []
    names = [name.strip() for name in header]
    one_column = _one_column_problem(names, path)
    if one_column is not None:
        return [], [one_column]
    keep, problems = _header_columns(names, path, fields)
    rows = _read_rows(reader, path, len(names), keep, list_fields, problems)
    return rows, problems


def _one_column_problem(names: list[str], path: Path) -> Problem | None:
    """The problem of a header saved with ';' or tabs between its fields, which reads as one column."""
    if len(names) == 1 and any(sep in names[0] for sep in (";", "\t")):
        sep = "';'" if ";" in names[0] else "tabs"
        return Problem(f"the header {names[0]!r} is one column: its fields are separated by {sep}",
                       "save the sheet as CSV with commas between columns (';' separates the entries "
                       "of a list inside one cell)", path, 1)
    return None


def _header_columns(names: list[str], path: Path, fields: Sequence[str]) -> tuple[dict[int, str], list[Problem]]:
    """The header's columns that name a field (index → field), and the problems of the others."""
    keep: dict[int, str] = {}
    problems: list[Problem] = []
    for column, name in enumerate(names, start=1):
        if name in fields and name not in keep.values():
            keep[column - 1] = name
        elif name in fields:
            problems.append(Problem(f"column {column} repeats the field {name!r}", "keep one column per field",
                                    path, 1))
        else:
            near = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.5)
            hint = (f"did you mean {near[0]!r}? " if near else "") + f"valid columns: {', '.join(fields)}"
            problems.append(Problem(f"column {column} of the header, {name!r}, is not a field", hint, path, 1))
    return keep, problems


def _read_rows(reader: Any, path: Path, columns: int, keep: dict[int, str], list_fields: Sequence[str],
               problems: list[Problem]) -> list[CsvRow]:
    """The data rows after the header, each with its first line; their problems are added to ``problems``.

    A syntax error ends the reading: the reader cannot tell where the next row starts.
    """
    rows: list[CsvRow] = []
    line = reader.line_num
    while True:
        start = line + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            problems.append(Problem(f"CSV syntax error: {exc}", _QUOTING, path, start))
            break
        line = reader.line_num
        if cells is None:
            break
        if not any(cell.strip() for cell in cells):
            continue  # a blank line between records
        if len(cells) > columns:
            problems.append(Problem(
                f"the row has {len(cells)} cells but the header names {columns} columns",
                "quote a cell that holds a comma (\"a, b\"), or add the missing column to the header", path, start))
            continue
        rows.append(CsvRow(start, _record(cells, keep, list_fields)))
    return rows


def _record(cells: list[str], keep: dict[int, str], list_fields: Sequence[str]) -> dict[str, Any]:
    """A row's fields as a record holds them: list fields split at ';', empty cells left out."""
    record: dict[str, Any] = {}
    for index, name in keep.items():
        value = cells[index].strip() if index < len(cells) else ""
        if not value:
            continue  # not given: the field's default applies
        if name in list_fields:
            record[name] = [entry.strip() for entry in value.split(LIST_SEPARATOR) if entry.strip()]
        else:
            record[name] = value
    return record


_SHARED = ("split", "language", "tags")
"""Fields of a conversation its rows share."""


def conversation_rows(rows: Sequence[CsvRow], path: Path, problems: list[Problem]) -> tuple[
        list[CsvRow], list[Problem]]:
    """The rows with each conversation's rows folded into one record with ``turns``, at its first row.

    ``split``, ``language`` and ``tags`` of a turn's row go to the conversation; every
    other cell to the turn. Rows that cannot be placed (no turn number, numbers out of
    order, conversation fields that disagree) are problems on their lines.
    """
    grouped: dict[str, list[CsvRow]] = {}
    out: list[CsvRow | str] = []
    problems = list(problems)
    for row in rows:
        conversation = row.fields.get("conversation")
        if conversation is None and "turn" in row.fields:
            problems.append(Problem(f"the row has turn {row.fields['turn']!r} but no conversation",
                                    "fill the conversation cell with the conversation's id, or empty the turn cell "
                                    "for a single question", path, row.line))
            continue
        if conversation is None:
            out.append(row)
            continue
        if conversation not in grouped:
            grouped[conversation] = []
            out.append(conversation)
        grouped[conversation].append(row)
    folded = []
    for entry in out:
        if isinstance(entry, CsvRow):
            folded.append(entry)
            continue
        conversation_row, found = _fold(entry, grouped[entry], path)
        problems += found
        folded.append(conversation_row)
    return folded, sorted(problems, key=lambda problem: problem.line or 0)


def _fold(conversation: str, rows: list[CsvRow], path: Path) -> tuple[CsvRow, list[Problem]]:
    """One conversation's rows as one record with ``turns``; and the problems of its numbering and shared fields."""
    problems = []
    shared: dict[str, tuple[Any, int]] = {}
    turns = []
    for number, row in enumerate(rows, start=1):
        fields = dict(row.fields)
        del fields["conversation"]
        given = fields.pop("turn", None)
        if given is None or given.strip() != str(number):
            what = "no turn number" if given is None else f"turn {given!r}"
            problems.append(Problem(
                f"row {number} of conversation {conversation!r} has {what}",
                f"number the rows of conversation {conversation!r} 1, 2, 3… in the order they come (this one "
                f"{number})", path, row.line, conversation))
        own_id = fields.pop("id", None)
        if own_id not in (None, conversation, f"{conversation}/{number}"):
            problems.append(Problem(
                f"turn {number}: the id cell {own_id!r} is neither the conversation {conversation!r} nor the turn "
                f"{conversation + '/' + str(number)!r}",
                "leave the id cell of a turn's row empty: the conversation cell names the record", path, row.line,
                conversation))
        for name in _SHARED:
            if name not in fields:
                continue
            value = fields.pop(name)
            if name in shared and shared[name][0] != value:
                earlier, line = shared[name]
                problems.append(Problem(
                    f"turn {number}: {name} {_cell(value)} differs from {_cell(earlier)} on line {line}: "
                    f"{name} belongs to the whole conversation",
                    f"give every row of conversation {conversation!r} the same {name}, or leave it empty on all but "
                    "one", path, row.line, conversation))
            shared.setdefault(name, (value, row.line))
        turns.append(fields)
    record = {"id": conversation, **{name: value for name, (value, _) in shared.items()}, "turns": turns}
    return CsvRow(rows[0].line, record, tuple(row.line for row in rows)), problems


def _cell(value: Any) -> str:
    return repr(LIST_SEPARATOR.join(value)) if isinstance(value, list) else repr(value)


_QUOTING = 'a cell that holds a comma, a quote or a line break is written in double quotes, with " doubled inside'
