"""Golden sets as users bring them: CSV files, negatives with reference answers, one-pass checks."""

from __future__ import annotations

import csv

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docpilot.corpus.pages import load_corpus
from docpilot.errors import InputError
from docpilot.golden.loading import check_golden, load_golden, read_golden
from docpilot.golden.warnings import warning_lines
from tests.conftest import DATA, ROOT

GOLDEN = DATA / "golden"
HEADER = "id,question,gold,gold_answer,identifiers,split,language,scope,expected_cause,tags\n"


def _error(path) -> str:
    with pytest.raises(InputError) as caught:
        load_golden(path)
    return str(caught.value)


def test_a_csv_file_reads_to_the_records_the_same_yaml_gives():
    assert load_golden(GOLDEN / "valid.csv") == load_golden(GOLDEN / "valid.yaml")


def test_the_demo_set_as_csv_reads_to_the_same_records(tmp_path):
    records = load_golden(ROOT / "evals" / "golden.yaml")
    path = tmp_path / "golden.csv"
    # A conversation's turns are rows that name it and their number; what reading them sets (earlier) has no column.
    fields = [name for name in type(records[0]).model_fields if name != "earlier"]
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for record in records:
            cells = []
            for name in fields:
                value = None if name == "id" and record.conversation else getattr(record, name)
                cells.append(";".join(value) if isinstance(value, list) else "" if value is None else value)
            writer.writerow(cells)
    assert load_golden(path) == records


def test_csv_errors_name_the_line_the_record_starts_on(tmp_path):
    path = tmp_path / "golden.csv"
    # The quoted answer spans two lines, so the bad record starts on line 4, not line 3.
    path.write_text(HEADER + 'a,Q one?,index,"one line\nand another",,dev,,,,\n'
                    "b,Q two?,index,,,train,,,,\n", encoding="utf-8")
    text = _error(path)
    assert text.startswith(f"{path}:4, record 'b': split is text 'train'") and "use one of: dev, test" in text


def test_a_misspelt_header_column_is_one_error_on_line_1(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("id,qestion,gold\na,Q?,index\nb,Q?,index\n", encoding="utf-8")
    text = _error(path)
    assert f"{path}:1: column 2 of the header, 'qestion', is not a field" in text
    assert "did you mean 'question'?" in text
    assert text.count("is not a field") == 1  # not blamed on every record


def test_a_row_with_too_many_cells_names_its_line(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("id,question\na,Q?\nb,Where, exactly?\n", encoding="utf-8")
    text = _error(path)
    assert text.startswith(f"{path}:3: the row has 3 cells but the header names 2 columns")
    assert 'quote a cell that holds a comma ("a, b")' in text


def test_a_missing_cell_says_which_cell_to_fill(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("id,question,gold\na,,index\n", encoding="utf-8")
    text = _error(path)
    assert "missing field 'question'" in text and "fill the question cell" in text


def test_a_negative_with_a_gold_answer_loads_with_a_warning_naming_it(tmp_path):
    path = GOLDEN / "negative_with_answer.yaml"
    checked = read_golden(path)
    (record,) = checked.records
    assert record.kind == "negative" and record.gold_answer == "It is free."  # kept, to be shown
    (warning,) = checked.warnings
    assert warning.kind == "negative-with-answer"
    assert (warning.problem.line, warning.problem.record) == (1, "pricing")
    assert "carries a gold_answer 'It is free.': it is kept and shown with the record, never scored" in \
        warning.problem.message
    assert warning_lines(checked.warnings, path) == [
        f"{path}: 1 negatives carry a gold_answer: kept and shown with the record, never scored (pricing)"]


def test_missing_but_required_fields_are_warnings():
    checked = read_golden(GOLDEN / "valid.yaml")
    kinds = {(w.problem.record, w.kind) for w in checked.warnings}
    assert kinds == {("deploying", "positive-without-answer")}
    path = GOLDEN / "valid.csv"
    assert {w.problem.record for w in read_golden(path).warnings} == {"deploying"}


def test_a_check_reports_record_errors_and_gold_entry_errors_in_one_pass(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("- {id: bad-split, question: Q?, gold: [index], split: train}\n"
                    "- {id: bad-gold, question: Q?, gold: [guide/nowhere], gold_answer: A.}\n"
                    "- {id: no-cause, question: Q?}\n", encoding="utf-8")
    checked = check_golden(path, load_corpus(GOLDEN / "docs"))
    assert [(p.record, p.line) for p in checked.errors] == [("bad-split", 1), ("bad-gold", 2)]
    assert "split is text 'train'" in checked.errors[0].message
    assert "gold entry 'guide/nowhere' names no page of the docs" in checked.errors[1].message
    assert [(w.problem.record, w.kind) for w in checked.warnings] == [("no-cause", "negative-without-cause")]


def test_a_semicolon_separated_sheet_is_told_to_use_commas(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("id;question;gold\na;Q?;index\n", encoding="utf-8")
    text = _error(path)
    assert "header 'id;question;gold' is one column: its fields are separated by ';'" in text
    assert "save the sheet as CSV with commas" in text


def test_windows_line_endings_and_a_byte_order_mark_read_the_same(tmp_path):
    path = tmp_path / "golden.csv"
    text = (GOLDEN / "valid.csv").read_text(encoding="utf-8").replace("\n", "\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert load_golden(path) == load_golden(GOLDEN / "valid.yaml")


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_#/0123456789", min_size=1, max_size=12)
_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).map(str.strip).filter(bool)


@st.composite
def _records(draw):
    count = draw(st.integers(min_value=1, max_value=6))
    records = []
    for n in range(count):
        gold = draw(st.lists(_WORD, max_size=3))
        record = {"id": f"r{n}", "question": draw(_TEXT), "gold": gold, "split": draw(st.sampled_from(["dev", "test"])),
                  "tags": draw(st.lists(_WORD, max_size=3))}
        if draw(st.booleans()):
            record["gold_answer"] = draw(_TEXT)
        if not gold and draw(st.booleans()):
            record["expected_cause"] = draw(st.sampled_from(["not-answerable", "out-of-scope", "unsafe"]))
        records.append(record)
    return records


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_records())
def test_any_set_reads_the_same_from_csv_and_yaml(records, tmp_path):
    fields = ["id", "question", "gold", "gold_answer", "split", "expected_cause", "tags"]
    yaml_path, csv_path = tmp_path / "g.yaml", tmp_path / "g.csv"
    yaml_path.write_text(yaml.safe_dump(records, allow_unicode=True), encoding="utf-8")
    with csv_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for record in records:
            writer.writerow([";".join(v) if isinstance(v := record.get(f, ""), list) else v for f in fields])
    assert load_golden(csv_path) == load_golden(yaml_path)
