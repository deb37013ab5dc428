"""Golden sets kept as spreadsheets: a CSV file read to the same records a YAML file gives.

The first row names the fields (``id,question,gold,gold_answer,...``); every later row
is one record. A cell of a list field (``gold``, ``identifiers``, ``scope``, ``tags``)
holds its entries separated by ``;``. An empty cell means the field is not given, so
its default applies, exactly as when a YAML record leaves the key out: an empty
``gold`` makes a negative, an empty ``scope`` allows the whole corpus. Lines are
counted as the file has them, so a cell that spans lines (quoted) does not shift the
line numbers that errors name.
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


_QUOTING = 'a cell that holds a comma, a quote or a line break is written in double quotes, with " doubled inside'
