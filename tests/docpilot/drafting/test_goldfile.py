"""The golden set's one writer: a moved gold entry is rewritten where it is written, and no other byte changes."""

from __future__ import annotations

import json

import pytest

from docpilot.drafting.goldfile import replace_gold
from docpilot.golden.loading import load_golden

MOVES = {"a": {"cli#run": "cli#eval-run"}, "c": {"guide#(top)": "guide/intro#(top)"}}

YAML = """\
# The set, commented by hand.
- id: a   # the first
  question: "How do I run it?"
  gold: [cli#run, 'cli#options',   "cli#run"]

- id: b
  question: Untouched?
  gold: ["cli#run"]   # the same entry, another record: it stays

- id: c
  question: Block list?
  gold:
    - "guide#(top)"
    - 'cli#run'
"""
YAML_FIXED = """\
# The set, commented by hand.
- id: a   # the first
  question: "How do I run it?"
  gold: [cli#eval-run, 'cli#options',   "cli#eval-run"]

- id: b
  question: Untouched?
  gold: ["cli#run"]   # the same entry, another record: it stays

- id: c
  question: Block list?
  gold:
    - "guide/intro#(top)"
    - 'cli#run'
"""


def test_a_yaml_set_changes_only_the_moved_entries_in_their_own_quotes(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text(YAML, encoding="utf-8")
    path.chmod(0o640)
    assert replace_gold(path, MOVES) == 3
    assert path.read_text(encoding="utf-8") == YAML_FIXED
    assert path.stat().st_mode & 0o777 == 0o640  # a user's file keeps its mode
    assert [r.gold for r in load_golden(path)] == [["cli#eval-run", "cli#options", "cli#eval-run"], ["cli#run"],
                                                   ["guide/intro#(top)", "cli#run"]]


def test_line_ends_a_byte_order_mark_and_a_records_mapping_are_kept(tmp_path):
    path = tmp_path / "golden.yml"
    text = "\ufeff# crlf\r\nrecords:\r\n  - id: a\r\n    question: Q?\r\n    gold: [cli#run]\r\n"
    path.write_bytes(text.encode("utf-8"))
    assert replace_gold(path, MOVES) == 1
    assert path.read_bytes() == text.replace("cli#run", "cli#eval-run").encode("utf-8")


def test_a_jsonl_set_changes_only_the_gold_strings(tmp_path):
    path = tmp_path / "golden.jsonl"
    lines = ['{"id": "a", "question": "cli#run?", "gold": ["cli#run", "x#y"], "tags": ["cli#run"]}',
             '{"id":"b","question":"Q?","gold":["cli#run"]}',
             '{"gold" : [ "guide#(top)" ], "id": "c", "question": "Q?"}']
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    assert replace_gold(path, MOVES) == 2
    fixed = [lines[0].replace('["cli#run", "x#y"]', '["cli#eval-run", "x#y"]'), lines[1],
             lines[2].replace("guide#(top)", "guide/intro#(top)")]
    assert path.read_bytes() == ("\r\n".join(fixed) + "\r\n").encode("utf-8")
    assert json.loads(fixed[0])["question"] == "cli#run?"  # the same text outside gold is not gold


def test_a_csv_set_changes_only_the_entry_inside_its_cell(tmp_path):
    path = tmp_path / "golden.csv"
    text = ('id,question,gold,scope\n'
            'a,"Run, then what?", cli#run ; x#y ,cli\n'
            'b,Q?,cli#run,cli\n'
            'c,"Two\nlines","guide#(top);cli#run",\n')
    path.write_text(text, encoding="utf-8")
    assert replace_gold(path, MOVES) == 2
    assert path.read_text(encoding="utf-8") == text.replace(" cli#run ;", " cli#eval-run ;").replace(
        '"guide#(top);', '"guide/intro#(top);')
    assert [r.gold for r in load_golden(path)] == [["cli#eval-run", "x#y"], ["cli#run"], ["guide/intro#(top)", "cli#run"]]


@pytest.mark.parametrize("name", ["golden.yaml", "golden.jsonl", "golden.csv"])
def test_nothing_to_move_writes_nothing(tmp_path, name):
    path = tmp_path / name
    text = {"golden.yaml": "- {id: z, question: \"Q?\", gold: [cli#run]}\n",
            "golden.jsonl": '{"id": "z", "question": "Q?", "gold": ["cli#run"]}\n',
            "golden.csv": "id,question,gold\nz,Q?,cli#run\n"}[name]
    path.write_text(text, encoding="utf-8")
    before = path.stat().st_mtime_ns
    assert replace_gold(path, MOVES) == 0
    assert path.read_text(encoding="utf-8") == text and path.stat().st_mtime_ns == before
