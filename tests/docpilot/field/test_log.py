"""Reading a log: dotted paths read as JMESPath reads them, and a JSONL log cut into parts reads the same turns."""

from __future__ import annotations

import json

import jmespath
import pytest

from docpilot.config.logs import LogMapping
from docpilot.errors import InputError
from docpilot.field.log import _compiled, _Fields, read_log, split_log

ITEMS = [
    {"a": {"b": 1}}, {"a": {"b": None}}, {"a": [1, 2]}, {"a": "text"}, {"a": {"b": {"c": [1]}}}, {}, {"b": 2},
    {"a": {"b": False}}, {"a": {"null": 3}},
]


@pytest.mark.parametrize("expression", ["a", "a.b", "a.b.c", "b", "a.null", "inputs.question"])
def test_a_dotted_path_is_read_without_the_parser_and_as_jmespath_reads_it(expression):
    compiled = _compiled(expression)
    assert isinstance(compiled, _Fields)  # the direct reading is the one taken for plain paths
    for item in ITEMS:
        assert compiled.search(item) == jmespath.search(expression, item), (expression, item)


@pytest.mark.parametrize("expression", ["a[0]", "[start, end]", "status == 'done'", '"Header 1"', "a.*"])
def test_any_other_expression_goes_to_jmespath(expression):
    assert not isinstance(_compiled(expression), _Fields)


def test_parts_of_a_jsonl_log_read_the_same_turns_with_their_line_numbers(tmp_path):
    path = tmp_path / "log.jsonl"
    lines = [json.dumps({"q": f"question {i} " + "x" * (i % 17)}) if i % 9 else "" for i in range(1, 301)]
    path.write_text("\n".join(lines) + "\n")
    mapping = LogMapping(question="q")
    whole = [(t.line, t.question) for t in read_log(path, mapping)]
    for n in (2, 3, 7):
        parts = split_log(path, n)
        assert parts[0].start == 0 and parts[-1].end is None
        joined = [(t.line, t.question) for part in parts for t in read_log(path, mapping, part)]
        assert joined == whole
    assert whole[0] == (1, "question 1 x") and len(whole) == 300 - 300 // 9


def test_a_bad_line_in_a_later_part_is_named_by_its_line_in_the_file(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"q": f"q{i}"}) + "\n" for i in range(1, 100)) + "{broken\n")
    parts = split_log(path, 3)
    with pytest.raises(InputError, match=r"log.jsonl:100: not a JSON line"):
        list(read_log(path, LogMapping(question="q"), parts[-1]))
