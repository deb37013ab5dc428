"""Golden sets and attack probes: reading them and checking them.

A file is YAML (a list of records, or a mapping with a ``records:`` list), JSONL (one
JSON object per line) or CSV (a header row naming the fields, one record per row;
``docpilot.golden.csvfile``). Every problem found is reported at once, each naming
the file, the record's first line, its id, the bad value and the fix, so one
``docpilot golden check`` shows everything that needs editing. Problems are *errors*
(the file cannot run) or *warnings* (it runs, and a number is weaker for it: a
negative that carries a reference answer, a positive without one, a negative that
does not say why it should be refused).

A record with ``turns:`` instead of ``question:`` is a conversation
(``docpilot.schema.Conversation``); in CSV its turns are rows sharing a
``conversation`` cell. It is read as one record per turn, id ``<id>/<turn>``
(``Conversation.records``), so everything downstream sees one record per question. A
problem of a turn names the turn and the line it starts on. Ids are unique across
records, conversations and turns.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from docpilot.errors import InputError
from docpilot.golden.csvfile import conversation_rows, parse_csv
from docpilot.golden.docs_folder import misplaced_docs
from docpilot.golden.probe_example import missing_probe_file
from docpilot.golden.warnings import GoldenWarning, Warned, conversation_warnings, golden_warnings
from docpilot.metrics.gold import TOP, scope_prefix
from docpilot.schema import AttackProbe, Conversation, ConversationTurn, GoldenRecord, turn_id
from docpilot.userfiles.intake import GOLDEN_SET, PROBE_FILE, read_text
from docpilot.userfiles.userfile import (
    Problem,
    describe,
    explain,
    line_of,
    mapping_entries,
    parse_jsonl,
    parse_yaml,
    raise_all,
    repeated_keys,
    show,
)

if TYPE_CHECKING:
    from docpilot.corpus.pages import Corpus

_Record = TypeVar("_Record", GoldenRecord, AttackProbe)
_Format = Literal["yaml", "jsonl", "csv"]
_Issue = tuple[str, str]  # (what is wrong, how to fix it)

_SUFFIXES: dict[str, _Format] = {".yaml": "yaml", ".yml": "yaml", ".jsonl": "jsonl", ".ndjson": "jsonl",
                                 ".csv": "csv"}
_LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")
_EXAMPLES = {
    "id": "<a unique id>",
    "question": "<the question as a user would type it>",
    "prompt": "<what the attacker sends>",
}
_FROM_TURNS = ("conversation", "turn", "earlier")
"""Fields of a turn's record that reading a conversation sets; a golden set never writes them."""
_PLAIN_FIELDS = tuple(name for name in GoldenRecord.model_fields if name not in (*_FROM_TURNS, "answer_given"))
"""What a single question may hold."""
_TURN_FIELDS = tuple(ConversationTurn.model_fields)
"""What each turn of a conversation holds."""
_CONVERSATION_FIELDS = tuple(name for name in Conversation.model_fields if name != "turns")
"""What a conversation holds beside its turns: the same for every turn."""

@dataclass(frozen=True)
class GoldenCheck:
    """Everything a check of one file found, in one pass."""

    records: list[Any]
    """The records that are valid on their own (all of them when there is no error)."""
    errors: list[Problem] = field(default_factory=list)
    """What keeps the file from running, in line order."""
    warnings: list[GoldenWarning] = field(default_factory=list)
    """What runs but weakens a number, in line order."""


@dataclass(frozen=True)
class _Item:
    """One record as parsed, before validation."""

    line: int
    raw: Any
    repeated_keys: list[tuple[str, int]]
    turn_lines: list[int] = field(default_factory=list)
    """For a conversation: the line each turn starts on, when the format tells them apart."""
    turn_repeats: list[list[tuple[str, int]]] = field(default_factory=list)
    """For a conversation in YAML: the keys each turn holds more than once."""

    def turn_line(self, turn: int | None) -> int:
        """The line of a turn (from 1), or of the record."""
        if turn is not None and 0 < turn <= len(self.turn_lines):
            return self.turn_lines[turn - 1]
        return self.line


def is_conversation(raw: Any) -> bool:
    """Whether a record as parsed is a conversation: a mapping with ``turns``."""
    return isinstance(raw, dict) and "turns" in raw


def load_golden(path: str | Path) -> list[GoldenRecord]:
    """Read and check a golden set; raise one InputError listing every problem."""
    return read_golden(path).records


def read_golden(path: str | Path) -> GoldenCheck:
    """Read a golden set: its records and warnings; raise one InputError listing every error."""
    checked = _check_file(Path(path), GoldenRecord, _golden_issues, golden_warnings)
    raise_all(checked.errors)
    return checked


def load_probes(path: str | Path) -> list[AttackProbe]:
    """Read and check an attack-probe file; raise one InputError listing every problem."""
    if not os.path.lexists(path):
        raise missing_probe_file(path)
    checked = _check_file(Path(path), AttackProbe, _probe_issues, lambda probe: [])
    raise_all(checked.errors)
    return checked.records


def check_golden(path: str | Path, corpus: Corpus | None = None) -> GoldenCheck:
    """Every problem of a golden set in one pass: record errors and, with the docs, gold-entry errors.

    Only a file that cannot be read or parsed at all raises; every other problem is
    returned, errors and warnings apart, in line order.
    """
    path = Path(path)
    checked = _check_file(path, GoldenRecord, _golden_issues, golden_warnings)
    errors = list(checked.errors)
    if corpus is not None:
        errors += corpus_problems(checked.records, corpus, path, stale_ok=True)
    errors.sort(key=lambda problem: problem.line or 0)
    return replace(checked, errors=errors)


def validate_against_corpus(records: Sequence[GoldenRecord], corpus: Corpus, path: str | Path | None = None) -> None:
    """Check that every gold entry and scope prefix names something in the docs.

    ``path`` is the golden file the records came from, so each problem can name the
    record's line. All problems are raised together as one InputError. A gold entry
    that names nothing but is held by the lock beside the file is stale gold, not a
    mistake: the run marks its row (``docpilot.golden.staleness``) instead of stopping.
    """
    raise_all(corpus_problems(records, corpus, path, stale_ok=True))


def corpus_problems(records: Sequence[GoldenRecord], corpus: Corpus, path: str | Path | None = None, *,
                    stale_ok: bool = False) -> list[Problem]:
    """Every gold entry and scope prefix of ``records`` that names nothing in the docs.

    With ``stale_ok``, a gold entry the lock beside ``path`` holds for its record is
    left out: it is stale gold, which ``docpilot.golden.staleness`` names.
    """
    file = Path(path) if path is not None else None
    misplaced = misplaced_docs(records, corpus, file)
    if misplaced is not None:  # one folder off: one problem with the folder, not one per record
        return [misplaced]
    page_ids = sorted(corpus.pages)
    folders = {page.rsplit("/", depth)[0] for page in page_ids for depth in range(1, page.count("/") + 1)}
    prefixes = set(page_ids) | folders
    found: list[tuple[tuple[str, str] | None, GoldenRecord, Problem]] = []  # (record, entry) of a gold entry
    for record in records:
        for entry in record.gold:
            if not corpus.has_entry(entry):
                page = entry.partition("#")[0]
                known_page = "#" in entry and page in corpus.pages
                what = f"no section of page {page!r}" if known_page else "no page of the docs"
                hint = _did_you_mean(corpus.closest(entry, n=3))
                if known_page and entry.endswith(f"#{TOP}"):
                    what = f"text above the first heading, and page {page!r} has none"
                    hint = f"pin one of its sections instead; `docpilot golden sections {page}` lists them"
                found.append(((record.id, entry), record, _named(record, f"gold entry {entry!r} names {what}",
                                                                  hint, file)))
        for prefix in record.scope or []:
            name = scope_prefix(prefix)  # the retriever's and the metric's reading: `/` is the whole docs
            if name and name not in prefixes:
                hint = _did_you_mean(difflib.get_close_matches(prefix, sorted(prefixes), n=3, cutoff=0.5))
                message = f"scope prefix {prefix!r} names no page or folder of the docs"
                found.append((None, record, _named(record, message, hint, file)))
    # With a lock beside the set it is read here, even when no entry needs it, so a broken lock stops a run
    # before any record is ranked; without one this is a single stat.
    locked = _locked(file) if stale_ok else set()
    kept = [(record, problem) for key, record, problem in found if key not in locked]
    if kept and file is not None:
        # Lines are looked up only now: finding them reads the file again.
        lines = _lines_by_id(file)
        return [replace(problem, line=lines.get(record.id)) for record, problem in kept]
    return [problem for _, problem in kept]


def _named(record: GoldenRecord, message: str, hint: str, file: Path | None) -> Problem:
    """A problem of a record; for a turn of a conversation, naming the conversation and the turn."""
    if record.conversation is not None:
        return Problem(f"turn {record.turn}: {message}", hint, file, None, record.conversation)
    return Problem(message, hint, file, None, record.id)


def _locked(file: Path | None) -> set[tuple[str, str]]:
    """The (record, gold entry) pairs the lock beside ``file`` holds; empty without a file or a lock."""
    from docpilot.golden.gold_state import locked_entries

    return set() if file is None else locked_entries(file)


# Reading ------------------------------------------------------------------------


def _check_file(path: Path, model: type[_Record], checks: Callable[[Any], list[_Issue]],
                warns: Callable[[Any], list[Warned]]) -> GoldenCheck:
    fmt = _format(path)
    items, problems = _parse(path, fmt, model)
    records: list[_Record] = []
    warnings: list[GoldenWarning] = []
    ids = _Ids(path)
    for item in items:
        record_id = _raw_id(item.raw)
        if model is GoldenRecord and is_conversation(item.raw):
            turns, found_problems, found_warnings = _read_conversation(item, fmt, path)
            records += turns
            problems += found_problems
            warnings += found_warnings
            clash = ids.add(record_id, item.line, "conversation")
            problems += clash
            for number, line in enumerate(_turn_lines(item) if record_id is not None and not clash else [], 1):
                problems += ids.add(turn_id(record_id, number), line, f"turn {number} of conversation {record_id!r}")
            continue
        found = _check_item(item, model, fmt)
        issues = found if isinstance(found, list) else checks(found)
        problems += [Problem(message, hint, path, item.line, record_id) for message, hint in issues]
        if not issues:
            records.append(found)
            warnings += [GoldenWarning(kind, Problem(message, hint, path, item.line, record_id))
                         for kind, message, hint in warns(found)]
        problems += ids.add(record_id, item.line, "record")
    return GoldenCheck(records=records, errors=problems, warnings=warnings)


class _Ids:
    """The ids a file has used so far, each with its line and what holds it: records, conversations, turns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: dict[str, tuple[int, str]] = {}

    def add(self, record_id: str | None, line: int, what: str) -> list[Problem]:
        """Note an id; the problem when it was used before."""
        if record_id is None:
            return []
        if record_id not in self.first:
            self.first[record_id] = (line, what)
            return []
        earlier, held = self.first[record_id]
        if held == what == "record":
            message = f"duplicate id {record_id!r}: lines {earlier} and {line} both use it"
            hint = "give each record its own id; reports find records by id"
        else:
            message = f"duplicate id {record_id!r}: the {held} on line {earlier} and the {what} on line {line} both use it"
            hint = "give each its own id; reports and --id find records and conversations by id"
            if "turn " in held + what:
                hint = ("give each its own id; a turn's id is its conversation's id, '/' and its number, so a record "
                        "may not take the id of a conversation's turn")
        conversation = record_id.rpartition("/")[0] if what.startswith("turn ") else record_id
        return [Problem(message, hint, self.path, line, conversation)]


def _turn_lines(item: _Item) -> list[int]:
    """The line of each turn of a conversation item (the record's line where the format gives none)."""
    turns = item.raw.get("turns") if isinstance(item.raw, dict) else None
    count = len(turns) if isinstance(turns, list) else 0
    return [item.turn_line(number) for number in range(1, count + 1)]


def _read_conversation(item: _Item, fmt: _Format, path: Path) -> tuple[
        list[GoldenRecord], list[Problem], list[GoldenWarning]]:
    """A conversation's records, one per turn; else what is wrong with it, each problem naming its turn."""
    record_id = _raw_id(item.raw)
    found = _check_conversation(item, fmt)
    if isinstance(found, list):
        return [], [_turn_problem(path, item, record_id, turn, message, hint) for turn, message, hint in found], []
    records = found.records()
    problems = [_turn_problem(path, item, found.id, None, message, hint) for message, hint in _record_issues(found)]
    warnings = []
    for record in records:
        problems += [_turn_problem(path, item, found.id, record.turn, message, hint)
                     for message, hint in _question_issues(record)]
        warned = golden_warnings(record) + (conversation_warnings(record) if record is records[-1] else [])
        warnings += [GoldenWarning(kind, _turn_problem(path, item, found.id, record.turn, message, hint), record.turn)
                     for kind, message, hint in warned]
    return ([] if problems else records), problems, warnings


def _turn_problem(path: Path, item: _Item, record_id: str | None, turn: int | None, message: str,
                  hint: str) -> Problem:
    """A problem of a conversation, at its turn's line and naming the turn when it is one turn's."""
    return Problem(f"turn {turn}: {message}" if turn is not None else message, hint, path, item.turn_line(turn),
                   record_id)


def _format(path: Path) -> _Format:
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None and path.is_file():
        raise InputError(f"cannot tell the format from the extension {path.suffix or '(none)'!r}", path=path,
                         hint="name the file .yaml or .yml for YAML, .jsonl for one JSON object per line, "
                              "or .csv for a header row of field names and one record per row")
    return fmt or "yaml"


def _parse(path: Path, fmt: _Format, model: type[BaseModel]) -> tuple[list[_Item], list[Problem]]:
    text = read_text(path, PROBE_FILE if model is AttackProbe else GOLDEN_SET)
    if not text.strip():
        raise InputError("the file is empty", path=path, hint="add records, each with at least an id and a question")
    problems: list[Problem] = []
    if fmt == "jsonl":
        items = [_Item(line, value, [(key, line) for key in keys]) for line, value, keys in parse_jsonl(text, path)]
    elif fmt == "csv":
        rows, problems = parse_csv(text, path, list(model.model_fields), _list_fields(model))
        if model is GoldenRecord:
            rows, problems = conversation_rows(rows, path, problems)
        items = [_Item(row.line, row.fields, [], list(row.turn_lines)) for row in rows]
    else:
        items = _yaml_items(text, path)
    if not items and not problems:
        raise InputError("holds no records", path=path, hint="add at least one record with an id and a question")
    return items, problems


def _yaml_items(text: str, path: Path) -> list[_Item]:
    """The records of a YAML file, from a top-level list or a `records:` mapping."""
    root, data = parse_yaml(text, path)
    if root is None:
        raise InputError(
            "holds only comments, no records", path=path, hint="add records, each with at least an id and a question"
        )
    shape_hint = "write a list of records (each starting with '- id: ...'), or a mapping with a `records:` list"
    if isinstance(root, yaml.MappingNode) and isinstance(data, dict):
        entries = {key: (node, line) for key, node, line in mapping_entries(root)}
        if "records" not in data and {"id", "question", "prompt"} & set(entries):
            raise InputError("holds a single record, not a list of records", path=path, line=line_of(root),
                             hint="put '- ' before the record's first key to make it the first item of a list")
        other = next((key for key in data if key != "records"), None)
        if other is not None:
            hint = "did you mean 'records'? " if difflib.get_close_matches(str(other), ["records"]) else ""
            line = entries[other][1] if other in entries else line_of(root)
            raise InputError(f"unknown top-level key {show(other)}", path=path, line=line,
                             hint=hint + "the only top-level key is `records:`, holding the list of records")
        if "records" not in data:
            raise InputError("holds an empty mapping, not records", path=path, line=line_of(root), hint=shape_hint)
        # The last `records:` wins, as it does when the document is built.
        root = next(v for k, v in reversed(root.value) if isinstance(k, yaml.ScalarNode) and k.value == "records")
        data = data["records"]
    if not (isinstance(root, yaml.SequenceNode) and isinstance(data, list)):
        message = f"holds {describe(data)}, not a list of records"
        raise InputError(message, path=path, line=line_of(root), hint=shape_hint)
    return [_yaml_item(node, value) for node, value in zip(root.value, data, strict=True)]


def _yaml_item(node: yaml.Node, value: Any) -> _Item:
    """One record of a YAML file, with the line and repeated keys of each turn when it is a conversation."""
    turns = None
    if is_conversation(value):  # a single question needs no look at its nodes beyond its own keys
        turns = next((child for key, child, _ in mapping_entries(node) if key == "turns"), None)
    if not isinstance(turns, yaml.SequenceNode):
        return _Item(line_of(node), value, repeated_keys(node))
    return _Item(line_of(node), value, repeated_keys(node), [line_of(turn) for turn in turns.value],
                 [repeated_keys(turn) for turn in turns.value])


def _lines_by_id(path: Path) -> dict[str, int]:
    """Each record id's first line, for naming records that already loaded."""
    try:
        items, _ = _parse(path, _format(path), GoldenRecord)
    except InputError:
        return {}
    lines: dict[str, int] = {}
    for item in items:
        record_id = _raw_id(item.raw)
        if record_id is not None:
            lines.setdefault(record_id, item.line)
        if record_id is not None and is_conversation(item.raw):
            for number, line in enumerate(_turn_lines(item), start=1):
                lines.setdefault(turn_id(record_id, number), line)
    return lines


# Checking -----------------------------------------------------------------------


def _check_item(item: _Item, model: type[_Record], fmt: _Format) -> _Record | list[_Issue]:
    """The validated record, or what is wrong with it."""
    raw = item.raw
    if not isinstance(raw, dict):
        example = '{"id": "q1", "question": "..."}' if fmt == "jsonl" else "`- id: q1` with `question: ...` below it"
        return [(f"a record must be a mapping of fields, not {describe(raw)}", f"write the record as {example}")]
    if model is GoldenRecord:
        return _validated(raw, model, fmt, item.repeated_keys, _PLAIN_FIELDS, _plain_field_issue)
    return _validated(raw, model, fmt, item.repeated_keys, list(model.model_fields))


def _validated(raw: dict, model: type[BaseModel], fmt: _Format, repeats: Sequence[tuple[str, int]],
               fields: Sequence[str], misplaced: Callable[[str], _Issue | None] = lambda key: None) -> Any:
    """``raw`` validated as ``model`` with only ``fields`` allowed, or what is wrong with it.

    ``misplaced`` names a key that is a field elsewhere (a turn's field on a conversation,
    a conversation's on a plain record) with its own message; any other unknown key is
    told the closest field.
    """
    issues = [(f"field {key!r} is given twice (the second time on line {line})", "keep one of them")
              for key, line in repeats]
    known = {}
    for key, value in raw.items():
        if isinstance(key, str) and key in fields:
            known[key] = value
            continue
        issue = misplaced(key) if isinstance(key, str) else None
        if issue is None:
            near = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
            issue = (f"unknown field {show(key)}",
                     (f"did you mean {near[0]!r}? " if near else "") + f"valid fields: {', '.join(fields)}")
        issues.append(issue)
    for name in _list_fields(model):
        if isinstance(known.get(name), str):
            value = known.pop(name)
            listed = f"{name}: [{value}]" if fmt == "yaml" else f'"{name}": [{json.dumps(value)}]'
            issues.append((f"{name} is a single string {show(value)}, not a list", f"write it as a list: {listed}"))
    try:
        record = model.model_validate(known)
    except ValidationError as exc:
        # A misspelt field already says "did you mean 'question'?"; "missing question" would only repeat it.
        suggested = {hint.split("'")[1] for _, hint in issues if hint.startswith("did you mean")}
        errors = [e for e in exc.errors() if not (e["type"] == "missing" and e["loc"][0] in suggested)]
        return issues + [_explain(error, fmt) for error in errors]
    return issues or record


def _plain_field_issue(key: str) -> _Issue | None:
    """The issue of a field a single-question record may not hold: one of a conversation's turn."""
    if key in _FROM_TURNS:
        return (f"field {key!r} is set when a conversation is read, one record per turn, never in a golden set",
                "remove it; to write a conversation, put its questions under `turns:` "
                "(docs/golden-set.md#conversations)")
    if key == "answer_given":
        return ("answer_given belongs to a turn of a conversation (the reply taken as the assistant's before the "
                "next turn), not to a single question",
                "remove it, or write the record as a conversation with its questions under `turns:`")
    return None


def _conversation_field_issue(key: str) -> _Issue | None:
    """The issue of a turn's field written on the conversation itself."""
    if key == "question":
        return ("a record holds both `question` and `turns`",
                "a single question keeps `question` and drops `turns`; a conversation puts each question in its "
                "own turn under `turns:`")
    if key in _TURN_FIELDS:
        return (f"field {key!r} belongs to each turn of a conversation, not to the conversation",
                f"move {key} under the turn it belongs to; the conversation holds {', '.join(_CONVERSATION_FIELDS)} "
                "and turns")
    return _plain_field_issue(key) if key in _FROM_TURNS else None


def _check_conversation(item: _Item, fmt: _Format) -> Conversation | list[tuple[int | None, str, str]]:
    """The validated conversation, or what is wrong with it as (turn or None, what, fix)."""
    raw = item.raw
    top = {key: value for key, value in raw.items() if key != "turns"}
    head = _validated(top, Conversation, fmt, item.repeated_keys, _CONVERSATION_FIELDS, _conversation_field_issue)
    found = head if isinstance(head, list) else []
    found = [issue for issue in found if not issue[0].startswith("missing field 'turns'")]
    issues: list[tuple[int | None, str, str]] = [(None, message, hint) for message, hint in found]
    turns = raw["turns"]
    if not isinstance(turns, list) or not turns:
        what = "an empty list" if turns == [] else describe(turns)
        issues.append((None, f"turns is {what}, not a list of turns",
                       "list the turns in order, each a mapping with at least `question:`"))
        return issues
    checked: list[ConversationTurn] = []
    for number, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            issues.append((number, f"a turn must be a mapping of fields, not {describe(turn)}",
                           "write the turn as a mapping with at least `question:`"))
            continue
        repeats = item.turn_repeats[number - 1] if number <= len(item.turn_repeats) else []
        result = _validated(turn, ConversationTurn, fmt, repeats, _TURN_FIELDS, _turn_field_issue)
        if isinstance(result, list):
            issues += [(number, message, hint) for message, hint in result]
        else:
            checked.append(result)
    if issues:
        return issues
    return Conversation.model_validate({**top, "turns": checked})


def _turn_field_issue(key: str) -> _Issue | None:
    """The issue of a conversation's field written on one of its turns."""
    if key in _CONVERSATION_FIELDS:
        return (f"field {key!r} belongs to the conversation, the same for every turn",
                f"move {key} up beside the conversation's id")
    if key in _FROM_TURNS:
        return _plain_field_issue(key)
    return None


def _explain(error: Any, fmt: _Format) -> _Issue:
    loc = error["loc"]
    field = str(loc[0]) if loc else "record"
    if error["type"] == "missing" and fmt == "csv":
        return (f"missing field {field!r}",
                f"fill the {field} cell (add a `{field}` column to the header if it has none)")
    if error["type"] == "missing":
        value = _EXAMPLES.get(field, "...")
        example = f"{field}: {value}" if fmt == "yaml" else f'"{field}": "{value}"'
        return f"missing field {field!r}", f"add `{example}`"
    name = field if len(loc) < 2 else f"{field} entry {loc[1] + 1 if isinstance(loc[1], int) else loc[1]}"
    message, hint = explain(error, name)
    if error["type"] == "literal_error":
        choices = re.findall(r"'([^']*)'", error["ctx"]["expected"])
        near = difflib.get_close_matches(str(error.get("input")), choices, n=1)
        hint = (f"did you mean {near[0]!r}? " if near else "") + hint
    elif error["type"] == "list_type" and field == "gold":
        hint += ", or `gold: []` for a negative"
    return message, hint


def _golden_issues(record: GoldenRecord) -> list[_Issue]:
    return _record_issues(record) + _question_issues(record)


def _record_issues(record: GoldenRecord | Conversation) -> list[_Issue]:
    """What is wrong with a record's own fields, which a conversation's turns share: its id and language."""
    issues = _blank("id", record.id)
    if record.language is not None and not _LANGUAGE_TAG.match(record.language):
        issues.append((f"language {show(record.language)} is not a BCP-47 tag", "use a tag such as en, de or pt-BR"))
    return issues


def _question_issues(record: GoldenRecord) -> list[_Issue]:
    """What is wrong with one question (a record, or a turn of a conversation): its text, gold, scope and cause."""
    issues = _blank("question", record.question)
    if record.gold and record.expected_cause:
        issues.append((f"a positive (gold {show(record.gold)}) has expected_cause {record.expected_cause!r}",
                       "remove expected_cause (it says why a negative is refused), "
                       "or empty gold to make the record a negative"))
    for name in ("gold", "identifiers", "scope"):
        for number, value in enumerate(getattr(record, name) or [], start=1):
            issues += _blank(f"{name} entry {number}", value, fix=f"remove the empty {name} entry")
    if record.scope == []:
        issues.append(("scope is an empty list, so the turn could draw from no page",
                       "list the page-id prefixes the turn may use, or remove scope to allow the whole corpus"))
    return issues


def _probe_issues(probe: AttackProbe) -> list[_Issue]:
    issues = _blank("id", probe.id) + _blank("prompt", probe.prompt)
    for number, entry in enumerate(probe.forbidden, start=1):
        pattern = entry[3:] if entry.startswith("re:") else entry
        if not pattern.strip():
            issues.append((f"forbidden entry {number} ({show(entry)}) is empty and matches every reply", "remove it"))
            continue
        if not entry.startswith("re:"):
            continue
        try:
            re.compile(pattern)
        except (re.error, ValueError, OverflowError, RecursionError) as exc:
            issues.append((f"forbidden entry {number} {show(entry)} is not a valid regular expression: {exc}",
                           "escape special characters with a backslash, or drop 're:' to match the text as written"))
    return issues


def _blank(name: str, value: str, fix: str | None = None) -> list[_Issue]:
    if value.strip():
        return []
    return [(f"{name} is empty (only white space)", fix or f"write the {name}, or remove the record")]


@cache  # asked once per record; the answer is per model
def _list_fields(model: type[BaseModel]) -> list[str]:
    def is_list(annotation: Any) -> bool:
        return get_origin(annotation) is list or any(get_origin(arg) is list for arg in get_args(annotation))

    return [name for name, field in model.model_fields.items() if is_list(field.annotation)]


# Messages -----------------------------------------------------------------------


def _did_you_mean(candidates: Sequence[str]) -> str:
    if candidates:
        return "did you mean: " + ", ".join(candidates) + "?"
    return (
        "a page id is the page's path under the docs folder without its extension, "
        "such as guide/auth or guide/auth#install"
    )


def _raw_id(raw: Any) -> str | None:
    value = raw.get("id") if isinstance(raw, dict) else None
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
