"""Golden conversations: the same chat read from YAML, JSONL and CSV, each turn a record, and every error naming its turn."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docpilot.corpus.pages import load_corpus
from docpilot.errors import InputError
from docpilot.golden.loading import check_golden, load_golden, read_golden
from docpilot.golden.selection import check_ids_in_split, select_records
from docpilot.golden.warnings import warning_lines
from docpilot.schema import EarlierTurn, Selection

DATA = Path(__file__).resolve().parents[2] / "data" / "golden"

YAML = """\
- id: install
  question: How do I install Acme?
  gold: [index#install]
  gold_answer: Install Acme with pip install acme-cli.
  split: dev

- id: auth-chat
  split: test
  language: en
  tags: [chat]
  turns:
    - question: How do I log in to Acme?
      gold: ["guide/auth#"]
      gold_answer: Export the token as ACME_TOKEN.
      identifiers: [ACME_TOKEN]
      answer_given: Set ACME_TOKEN to your token.
    - question: And how do I deploy once I am logged in?
      gold: [guide/deploy]
      gold_answer: Run acme deploy.
      scope: [guide]
    - question: Can it deploy to Mars?
      gold: []
      expected_cause: not-answerable
"""

JSONL_RECORDS = [
    {"id": "install", "question": "How do I install Acme?", "gold": ["index#install"],
     "gold_answer": "Install Acme with pip install acme-cli.", "split": "dev"},
    {"id": "auth-chat", "split": "test", "language": "en", "tags": ["chat"], "turns": [
        {"question": "How do I log in to Acme?", "gold": ["guide/auth#"],
         "gold_answer": "Export the token as ACME_TOKEN.", "identifiers": ["ACME_TOKEN"],
         "answer_given": "Set ACME_TOKEN to your token."},
        {"question": "And how do I deploy once I am logged in?", "gold": ["guide/deploy"],
         "gold_answer": "Run acme deploy.", "scope": ["guide"]},
        {"question": "Can it deploy to Mars?", "gold": [], "expected_cause": "not-answerable"},
    ]},
]

CSV = """\
id,conversation,turn,question,gold,gold_answer,identifiers,scope,expected_cause,answer_given,split,language,tags
install,,,How do I install Acme?,index#install,Install Acme with pip install acme-cli.,,,,,dev,,
,auth-chat,1,How do I log in to Acme?,guide/auth#,Export the token as ACME_TOKEN.,ACME_TOKEN,,,Set ACME_TOKEN to your token.,test,en,chat
,auth-chat,2,And how do I deploy once I am logged in?,guide/deploy,Run acme deploy.,,guide,,,test,,chat
,auth-chat,3,Can it deploy to Mars?,,,,,not-answerable,,,,
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_golden(path)
    return str(caught.value)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(DATA / "docs")


# Reading ------------------------------------------------------------------------


def test_a_conversation_reads_as_one_record_per_turn_each_carrying_the_turns_before(tmp_path):
    records = load_golden(_write(tmp_path, "golden.yaml", YAML))
    assert [r.id for r in records] == ["install", "auth-chat/1", "auth-chat/2", "auth-chat/3"]
    single, first, second, third = records
    assert single.conversation is None and single.turn is None and single.earlier == []
    assert [(r.conversation, r.turn) for r in (first, second, third)] == [("auth-chat", 1), ("auth-chat", 2),
                                                                          ("auth-chat", 3)]
    assert {r.split for r in (first, second, third)} == {"test"} and third.tags == ["chat"]
    assert second.earlier == [EarlierTurn(question="How do I log in to Acme?",
                                          answer_given="Set ACME_TOKEN to your token.")]
    # Without answer_given, the turn's reply is the assistant's own, of the run: None here.
    assert third.earlier[1] == EarlierTurn(question="And how do I deploy once I am logged in?", answer_given=None)
    assert second.scope == ["guide"] and first.scope is None
    assert third.kind == "negative" and third.expected_cause == "not-answerable"


def test_yaml_jsonl_and_csv_read_the_same_conversation_to_the_same_records(tmp_path):
    from_yaml = load_golden(_write(tmp_path, "golden.yaml", YAML))
    jsonl = "".join(json.dumps(record) + "\n" for record in JSONL_RECORDS)
    assert load_golden(_write(tmp_path, "golden.jsonl", jsonl)) == from_yaml
    assert load_golden(_write(tmp_path, "golden.csv", CSV)) == from_yaml


def test_a_set_without_conversations_reads_as_before():
    records = load_golden(DATA / "valid.yaml")
    assert all(r.conversation is None and r.turn is None and r.earlier == [] for r in records)
    assert load_golden(DATA / "valid.csv") == records


def test_a_turns_error_names_the_file_the_turns_line_the_conversation_and_the_turn(tmp_path):
    path = _write(tmp_path, "golden.yaml", YAML.replace("      gold: [guide/deploy]\n",
                                                        "      gold: guide/deploy\n      golds: [x]\n"))
    text = _error(path)
    assert f"{path}:17, record 'auth-chat': turn 2: gold is a single string 'guide/deploy', not a list" in text
    assert f"{path}:17, record 'auth-chat': turn 2: unknown field 'golds'" in text
    assert "did you mean 'gold'?" in text


def test_a_gold_entry_of_a_turn_that_names_nothing_names_the_turn_and_its_line(tmp_path, corpus):
    path = _write(tmp_path, "golden.yaml", YAML.replace("gold: [guide/deploy]", "gold: [guide/deplyo]"))
    checked = check_golden(path, corpus)
    [problem] = checked.errors
    assert (problem.path, problem.line, problem.record) == (path, 17, "auth-chat")
    assert problem.message == "turn 2: gold entry 'guide/deplyo' names no page of the docs"
    assert "guide/deploy" in problem.hint


def test_a_jsonl_conversation_names_its_line_and_the_turn(tmp_path):
    broken = json.loads(json.dumps(JSONL_RECORDS))
    broken[1]["turns"][2]["gold"] = ["index"]  # a positive that keeps its expected cause
    path = _write(tmp_path, "golden.jsonl", "".join(json.dumps(r) + "\n" for r in broken))
    text = _error(path)
    assert text.startswith(f"{path}:2, record 'auth-chat': turn 3: a positive (gold ['index']) has expected_cause")


@pytest.mark.parametrize(("field", "said"), [
    ("conversation: auth", "field 'conversation' is set when a conversation is read"),
    ("turn: 2", "field 'turn' is set when a conversation is read"),
    ("earlier: []", "field 'earlier' is set when a conversation is read"),
    ("answer_given: Yes.", "answer_given belongs to a turn of a conversation"),
])
def test_a_single_question_may_not_set_what_reading_a_conversation_sets(tmp_path, field, said):
    path = _write(tmp_path, "golden.yaml", f"- id: q\n  question: Q?\n  gold: [index]\n  {field}\n")
    assert _error(path).startswith(f"{path}:1, record 'q': {said}")


def test_a_record_with_question_and_turns_and_fields_in_the_wrong_place_is_told_where_they_go(tmp_path):
    path = _write(tmp_path, "golden.yaml", """\
- id: c
  question: Where?
  gold: [index]
  turns:
    - question: One?
      split: dev
    - 42
- id: d
  turns: []
""")
    text = _error(path)
    assert f"{path}:1, record 'c': a record holds both `question` and `turns`" in text
    assert f"{path}:1, record 'c': field 'gold' belongs to each turn of a conversation" in text
    assert f"{path}:5, record 'c': turn 1: field 'split' belongs to the conversation" in text
    assert f"{path}:7, record 'c': turn 2: a turn must be a mapping of fields, not the number 42" in text
    assert f"{path}:8, record 'd': turns is an empty list, not a list of turns" in text


def test_a_record_that_takes_a_turns_id_is_an_error_naming_both_lines(tmp_path):
    path = _write(tmp_path, "golden.yaml", """\
- id: a/2
  question: Q?
  gold: [index]
- id: a
  turns:
    - question: One?
      gold: [index]
    - question: Two?
      gold: [index]
""")
    text = _error(path)
    assert (f"{path}:8, record 'a': duplicate id 'a/2': the record on line 1 and the turn 2 of conversation 'a' "
            "on line 8 both use it") in text


def test_a_conversation_and_a_record_may_not_share_an_id(tmp_path):
    path = _write(tmp_path, "golden.yaml", YAML.replace("- id: install", "- id: auth-chat"))
    assert "duplicate id 'auth-chat': the record on line 1 and the conversation on line 7 both use it" in _error(path)


def test_csv_rows_of_a_conversation_must_agree_and_count_from_one(tmp_path):
    path = _write(tmp_path, "golden.csv", """\
conversation,turn,question,gold,split,tags
c1,1,First?,index,dev,x
c1,2,Second?,index,test,x
c2,2,Only?,index,,
,3,Orphan?,index,,
""")
    text = _error(path)
    assert f"{path}:3, record 'c1': turn 2: split 'test' differs from 'dev' on line 2" in text
    assert f"{path}:4, record 'c2': row 1 of conversation 'c2' has turn '2'" in text
    assert f"{path}:5: the row has turn '3' but no conversation" in text


def test_csv_rows_may_leave_the_conversations_fields_to_one_row(tmp_path):
    path = _write(tmp_path, "golden.csv", "conversation,turn,question,gold,split\nc,1,One?,index,\nc,2,Two?,index,test\n")
    assert [(r.id, r.split) for r in load_golden(path)] == [("c/1", "test"), ("c/2", "test")]


def test_warnings_name_the_turn_and_eval_lists_the_turns_id(tmp_path):
    path = _write(tmp_path, "golden.yaml", YAML.replace("      gold_answer: Run acme deploy.\n", ""))
    warnings = read_golden(path).warnings
    [warning] = warnings
    assert warning.problem.where() == f"{path}:17, record 'auth-chat'"
    assert warning.problem.message.startswith("turn 2: a positive has no gold_answer")
    assert warning.record_id == "auth-chat/2"
    assert "(auth-chat/2)" in warning_lines(warnings, path)[0]


# Selection ----------------------------------------------------------------------


def test_an_id_of_a_conversation_selects_all_its_turns_and_a_turns_id_the_turns_up_to_it(tmp_path):
    records = load_golden(_write(tmp_path, "golden.yaml", YAML))
    pick = lambda **kw: [r.id for r in select_records(records, Selection(**kw))]  # noqa: E731
    assert pick(ids=["auth-chat"]) == ["auth-chat/1", "auth-chat/2", "auth-chat/3"]
    assert pick(ids=["auth-chat/2"]) == ["auth-chat/1", "auth-chat/2"]
    assert pick(ids=["install", "auth-chat/1"]) == ["install", "auth-chat/1"]
    assert pick(tags=["chat"]) == ["auth-chat/1", "auth-chat/2", "auth-chat/3"]


def test_limit_counts_a_conversation_as_one_record_and_never_cuts_it(tmp_path):
    records = load_golden(_write(tmp_path, "golden.yaml", YAML))
    assert [r.id for r in select_records(records, Selection(limit=1))] == ["install"]
    assert [r.id for r in select_records(records, Selection(limit=2))] == ["install", "auth-chat/1", "auth-chat/2",
                                                                           "auth-chat/3"]


def test_an_unknown_id_suggests_conversations_and_turns(tmp_path):
    records = load_golden(_write(tmp_path, "golden.yaml", YAML))
    with pytest.raises(InputError, match=r"(?s)--id auth-chat/9: no such record.*did you mean auth-chat/3, auth-chat/2, auth-chat/1"):
        select_records(records, Selection(ids=["auth-chat/9"]))


def test_an_id_of_a_conversation_in_another_split_says_which(tmp_path):
    records = load_golden(_write(tmp_path, "golden.yaml", YAML))
    with pytest.raises(InputError, match="auth-chat is in the test split, not in dev"):
        check_ids_in_split(records, "dev", ["auth-chat"])
    with pytest.raises(InputError, match="auth-chat/2 is in the test split"):
        check_ids_in_split(records, "dev", ["auth-chat/2"])


# The lock --------------------------------------------------------------------------

CHAT = {"id": "chat", "split": "dev", "turns": [
    {"question": "What does the scorecard show?", "gold": ["getting-started#"],
     "gold_answer": "The headline metrics."},
    {"question": "And how is its MRR computed?", "gold": ["metrics/retrieval#mrr"],
     "gold_answer": "The reciprocal rank of the first retrieved section that matches any gold entry."},
]}


def _chat_file(folder: Path, fmt: str) -> Path:
    if fmt == "yaml":
        return _write(folder, "golden.yaml", """\
- id: chat
  split: dev
  turns:
    - question: What does the scorecard show?
      gold: ["getting-started#"]
      gold_answer: The headline metrics.
    # the follow-up leans on the first turn
    - question: And how is its MRR computed?
      gold: [metrics/retrieval#mrr]
      gold_answer: The reciprocal rank of the first retrieved section that matches any gold entry.
""")
    if fmt == "jsonl":
        return _write(folder, "golden.jsonl", json.dumps(CHAT) + "\n")
    turns = CHAT["turns"]
    rows = [f'chat,{n},{t["question"]},{t["gold"][0]},"{t["gold_answer"]}",dev' for n, t in enumerate(turns, 1)]
    return _write(folder, "golden.csv", "conversation,turn,question,gold,gold_answer,split\n" + "\n".join(rows) + "\n")


@pytest.mark.parametrize("fmt", ["yaml", "jsonl", "csv"])
def test_a_turns_gold_is_locked_by_its_id_and_a_moved_entry_is_fixed_in_place(tmp_path, fmt):
    from click.testing import CliRunner

    from docpilot.cli import main
    from docpilot.golden.gold_state import lock_path
    from docpilot.golden.lock import read_lock
    from tests.support.moved_docs import copy_demo, move_the_docs

    copy_demo(tmp_path)
    golden = _chat_file(tmp_path, fmt)
    docs = str(tmp_path / "docs")
    locked = CliRunner().invoke(main, ["golden", "lock", "chat", "--golden", str(golden), "--docs", docs])
    assert locked.exit_code == 0, locked.output
    assert list(read_lock(lock_path(golden)).records) == ["chat/1", "chat/2"]

    move_the_docs(tmp_path / "docs")
    checked = CliRunner().invoke(main, ["golden", "check", "--golden", str(golden), "--docs", docs])
    assert checked.exit_code == 1, checked.output
    assert "moved     chat/2: metrics/retrieval#mrr → metrics/retrieval#mean-reciprocal-rank" in checked.output
    assert "1 single question" not in checked.output and "1 conversation of 2 turns" in checked.output

    before = golden.read_text(encoding="utf-8")
    fixed = CliRunner().invoke(main, ["golden", "check", "--fix", "--golden", str(golden), "--docs", docs])
    assert "chat/2: metrics/retrieval#mrr → metrics/retrieval#mean-reciprocal-rank" in fixed.output
    after = golden.read_text(encoding="utf-8")
    assert after == before.replace("metrics/retrieval#mrr", "metrics/retrieval#mean-reciprocal-rank")
    assert load_golden(golden)[1].gold == ["metrics/retrieval#mean-reciprocal-rank"]


def test_golden_check_json_counts_conversations_and_turns(tmp_path):
    from click.testing import CliRunner

    from docpilot.cli import main

    path = _write(tmp_path, "golden.yaml", YAML)
    shown = CliRunner().invoke(main, ["golden", "check", "--golden", str(path), "--docs", str(DATA / "docs"),
                                      "--json"])
    assert shown.exit_code == 0, shown.output
    facts = json.loads(shown.stdout)
    assert (facts["records"], facts["conversations"], facts["turns"]) == (4, 1, 3)
    assert facts["splits"]["test"] == {"positives": 2, "negatives": 1}  # turns count as records do in a run
    assert {r["id"] for r in facts["bias"]["records"]} == {"install", "auth-chat/1", "auth-chat/2"}
    by_turn = facts["bias_by_turn"]
    assert (by_turn["first turns"]["positives"], by_turn["follow-ups"]["positives"]) == (2, 1)


def test_a_set_without_conversations_has_no_bias_by_turn(tmp_path):
    from click.testing import CliRunner

    from docpilot.cli import main

    shown = CliRunner().invoke(main, ["golden", "check", "--golden", str(DATA / "valid.yaml"), "--docs",
                                      str(DATA / "docs"), "--json"])
    facts = json.loads(shown.stdout)
    assert facts["bias_by_turn"] is None and (facts["conversations"], facts["turns"]) == (0, 0)


def test_an_answer_given_on_the_last_turn_is_a_warning_that_it_is_never_used(tmp_path):
    path = _write(tmp_path, "golden.yaml", YAML.replace("      expected_cause: not-answerable\n",
                                                        "      expected_cause: not-answerable\n"
                                                        "      answer_given: No.\n"))
    [warning] = read_golden(path).warnings
    assert warning.kind == "answer-given-unused" and warning.record_id == "auth-chat/3"
    assert warning.problem.message.startswith("turn 3: the last turn has an answer_given")


def test_two_conversations_with_one_id_are_one_error_not_one_per_turn(tmp_path):
    path = _write(tmp_path, "golden.yaml", "- id: a\n  turns:\n    - question: One?\n- id: a\n  turns:\n"
                                           "    - question: Two?\n")
    assert _error(path).startswith(f"{path}:4, record 'a': duplicate id 'a': the conversation on line 1 and the "
                                   "conversation on line 4 both use it")


# Every format, one reading ---------------------------------------------------------

_TEXT = st.text(alphabet=st.sampled_from("abcXYZ ,.?'\"-é"), min_size=1, max_size=20).map(str.strip).filter(bool)
_GOLD = st.lists(st.sampled_from(["index", "guide/auth#", "guide/deploy#rollback"]), max_size=2, unique=True)
_TURN = st.fixed_dictionaries({"question": _TEXT, "gold": _GOLD},
                              optional={"gold_answer": _TEXT, "answer_given": _TEXT})
_SHARED = {"split": st.sampled_from(["dev", "test"]), "tags": st.lists(st.sampled_from(["x", "y"]), min_size=1,
                                                                        max_size=2, unique=True)}
_PLAIN = st.fixed_dictionaries({"question": _TEXT, "gold": _GOLD}, optional={"gold_answer": _TEXT, **_SHARED})
_CHAT = st.fixed_dictionaries({"turns": st.lists(_TURN, min_size=1, max_size=3)}, optional=_SHARED)


def _csv_rows(records: list[dict]) -> str:
    columns = ["id", "conversation", "turn", "question", "gold", "gold_answer", "answer_given", "split", "tags"]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for record in records:
        shared = {name: record[name] for name in ("split", "tags") if name in record}
        turns = record.get("turns")
        rows = [{"id": record["id"], **record} | shared] if turns is None else [
            {"conversation": record["id"], "turn": n, **turn, **shared} for n, turn in enumerate(turns, 1)]
        for row in rows:
            writer.writerow([";".join(v) if isinstance(v := row.get(c, ""), list) else v for c in columns])
    return out.getvalue()


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(_PLAIN, _CHAT), min_size=1, max_size=5))
def test_yaml_jsonl_and_csv_read_any_mix_of_questions_and_conversations_alike(tmp_path, drawn):
    records = [{"id": f"r{n}", **record} for n, record in enumerate(drawn)]
    from_yaml = load_golden(_write(tmp_path, "golden.yaml", yaml.safe_dump(records, allow_unicode=True)))
    jsonl = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    assert load_golden(_write(tmp_path, "golden.jsonl", jsonl)) == from_yaml
    assert load_golden(_write(tmp_path, "golden.csv", _csv_rows(records))) == from_yaml
    assert len(from_yaml) == sum(len(r.get("turns", [None])) for r in records)
