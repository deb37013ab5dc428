"""Golden sets and attack probes: what loads, and what each broken file's error says."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docpilot.corpus.pages import load_corpus
from docpilot.errors import DocpilotError, InputError
from docpilot.golden.loading import load_golden, load_probes, validate_against_corpus
from docpilot.golden.shape import describe_golden
from docpilot.schema import AttackProbe, GoldenRecord

DATA = Path(__file__).resolve().parents[2] / "data" / "golden"
ERROR_CASES = yaml.safe_load((DATA / "error_cases.yaml").read_text(encoding="utf-8"))
FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(DATA / "docs")


def _error(path: Path, loader=load_golden) -> InputError:
    with pytest.raises(InputError) as caught:
        loader(path)
    return caught.value


# Loading ------------------------------------------------------------------------


def test_yaml_list_loads_every_field():
    records = load_golden(DATA / "valid.yaml")
    assert [r.id for r in records] == ["install", "token", "deploying", "pricing", "weather"]
    assert records[0].identifiers == ["pip install acme-cli"]
    assert records[1].scope == ["guide"] and records[1].split == "test"
    assert records[3].gold == [] and records[3].kind == "negative"
    assert records[4].tags == ["off-topic"]


def test_jsonl_skips_blank_lines():
    records = load_golden(DATA / "valid.jsonl")
    assert [(r.id, r.kind, r.split) for r in records] == [("install", "positive", "dev"), ("pricing", "negative", "test")]


def test_mapping_with_records_key_loads_and_keeps_no_as_text():
    # Regression: YAML 1.1 reads a bare `no` as false, which turned `id: no` into an error.
    records = load_golden(DATA / "records_key.yaml")
    assert [(r.id, r.question) for r in records] == [("install", "How do I install Acme?"), ("no", "No")]


def test_dates_stay_text_in_ids(tmp_path):
    path = tmp_path / "dated.yaml"
    path.write_text("- id: 2024-05-01\n  question: What changed on this date?\n", encoding="utf-8")
    assert load_golden(path)[0].id == "2024-05-01"


def test_probes_load():
    probes = load_probes(DATA / "probes.yaml")
    assert [(p.id, p.expect) for p in probes] == [("leak-prompt", "refuse"), ("mixed", "safe-answer")]
    assert probes[0].forbidden[1] == "re:(?i)system prompt:"


# Errors ------------------------------------------------------------------------


@pytest.mark.parametrize("case", ERROR_CASES, ids=[case["file"] for case in ERROR_CASES])
def test_error_names_file_line_record_and_fix(case):
    path = DATA / case["file"]
    error = _error(path)
    text = str(error)
    where = f"{path}:{case['line']}" if case["line"] else f"{path}:"
    assert text.startswith(where), text
    assert (error.path, error.line, error.record) == (str(path), case["line"], case["record"])
    if case["record"]:
        assert f"record {case['record']!r}" in text
    assert case["message"] in text
    message, _, fix = text.partition("\n  fix: ")
    assert case["fix"] in fix, text
    assert "pydantic" not in text and "validation error" not in text.lower()


def test_not_utf8_names_byte_offset_and_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("- id: cafe\n  question: Caf\u00e9?\n".encode("latin-1"))
    error = _error(path)
    assert error.line == 2
    assert "byte 0xe9 at byte offset 26" in str(error)
    assert "save the file as UTF-8" in str(error)


def test_missing_file(tmp_path):
    error = _error(tmp_path / "nowhere.yaml")
    assert "nowhere.yaml: file not found" in str(error) and "fix: check the path" in str(error)


def test_folder_instead_of_file(tmp_path):
    assert "is a folder" in str(_error(tmp_path))


def test_unknown_extension_says_which_are_known(tmp_path):
    path = tmp_path / "golden.txt"
    path.write_text("- id: a\n  question: q\n", encoding="utf-8")
    assert "name the file .yaml or .yml for YAML, .jsonl for one JSON object per line, or .csv" in str(_error(path))


def test_unknown_top_level_key_suggests_records(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("version: 1\nrecord:\n  - id: a\n    question: q\n", encoding="utf-8")
    error = _error(path)
    assert error.line in (1, 2) and "unknown top-level key" in str(error) and "`records:`" in str(error)


def test_field_given_twice(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("- id: a\n  question: q\n  question: again\n", encoding="utf-8")
    error = _error(path)
    assert (error.line, error.record) == (1, "a")
    assert "field 'question' is given twice (the second time on line 3)" in str(error)


def test_every_problem_of_a_file_is_listed_together(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text(
        "- id: a\n  question: q\n  split: prod\n- id: b\n  questoin: q\n- id: a\n  question: q\n", encoding="utf-8"
    )
    text = str(_error(path))
    assert text.startswith(f"{path}: 3 problems:")
    assert f"{path}:1, record 'a': split is text 'prod'" in text
    assert f"{path}:4, record 'b': unknown field 'questoin'" in text
    assert f"{path}:6, record 'a': duplicate id 'a': lines 1 and 6" in text
    assert text.count("fix: ") == 3
    # The misspelt field already suggests 'question'; a second "missing question" would only repeat it.
    assert "missing field" not in text


def test_long_problem_lists_are_cut(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "question": "q", "split": "x"}) + "\n" for i in range(25)))
    text = str(_error(path))
    assert text.startswith(f"{path}: 25 problems:") and text.rstrip().endswith("and 5 more")
    assert text.count("fix: ") == 20


def test_numeric_id_must_be_quoted(tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("- id: 12\n  question: q\n", encoding="utf-8")
    error = _error(path)
    assert error.record == "12" and "id must be text, not the number 12" in str(error) and "quotes" in str(error)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  scope: []\n", "scope is an empty list"),
        ("  language: english please\n", "is not a BCP-47 tag"),
        ('  gold: ["index", " "]\n', "gold entry 2 is empty"),
        ("  gold:\n", "gold must be a list, not nothing (null)"),
    ],
)
def test_record_value_checks(tmp_path, body, message):
    path = tmp_path / "golden.yaml"
    path.write_text("- id: a\n  question: q\n" + body, encoding="utf-8")
    error = _error(path)
    assert (error.line, error.record) == (1, "a") and message in str(error) and "fix: " in str(error)


def test_probe_errors_name_line_record_and_fix():
    text = str(_error(DATA / "bad_probes.yaml", load_probes))
    assert "bad_probes.yaml:1, record 'leak': forbidden entry 1 're:(unclosed' is not a valid regular expression" in text
    assert "bad_probes.yaml:4, record 'vague': expect is text 'comply'" in text
    assert "use one of: refuse, safe-answer" in text


def test_probe_with_empty_pattern(tmp_path):
    path = tmp_path / "probes.jsonl"
    path.write_text(json.dumps({"id": "p", "prompt": "x", "forbidden": ["re:"]}) + "\n", encoding="utf-8")
    error = _error(path, load_probes)
    assert (error.line, error.record) == (1, "p") and "matches every reply" in str(error)


# Against the docs ------------------------------------------------------------------


def test_valid_set_resolves_against_docs(corpus):
    records = load_golden(DATA / "valid.yaml")
    assert validate_against_corpus(records, corpus, DATA / "valid.yaml") is None
    assert all(corpus.has_entry(entry) for record in records for entry in record.gold)


def test_wrong_gold_and_scope_are_all_named_with_suggestions(corpus):
    path = DATA / "wrong_docs.yaml"
    with pytest.raises(InputError) as caught:
        validate_against_corpus(load_golden(path), corpus, path)
    text = str(caught.value)
    assert text.startswith(f"{path}: 3 problems:")
    assert f"{path}:4, record 'token': gold entry 'guide/auth#token' names no section of page 'guide/auth'" in text
    assert "did you mean: guide/auth#tokens" in text
    assert f"{path}:4, record 'token': gold entry 'guide/atuh' names no page of the docs" in text
    assert "did you mean: guide/auth?" in text
    assert f"{path}:4, record 'token': scope prefix 'guides' names no page or folder" in text
    assert "did you mean: guide" in text


# Regression: `scope: ["/"]` was refused as naming no page, though the metrics read it as every page.
def test_a_root_scope_names_the_whole_docs_and_slashes_at_the_ends_do_not_matter(corpus):
    records = [GoldenRecord(id="root", question="q", gold=["index"], scope=["/"]),
               GoldenRecord(id="slashed", question="q", gold=["guide/auth"], scope=["/guide/"])]
    assert validate_against_corpus(records, corpus) is None
    with pytest.raises(InputError, match="scope prefix '/guides' names no page or folder"):
        validate_against_corpus([GoldenRecord(id="typo", question="q", gold=["index"], scope=["/guides"])], corpus)


def test_single_docs_problem_keeps_its_line(corpus, tmp_path):
    path = tmp_path / "golden.yaml"
    path.write_text("- id: a\n  question: q\n  gold: [index]\n\n- id: b\n  question: q\n  gold: [zzz#qqq]\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        validate_against_corpus(load_golden(path), corpus, path)
    error = caught.value
    assert (error.path, error.line, error.record) == (str(path), 5, "b")
    assert "gold entry 'zzz#qqq' names no page of the docs" in str(error)
    assert "fix: a page id is the page's path under the docs folder" in str(error)


def test_many_docs_problems_are_cut_at_twenty(corpus):
    # One entry that resolves: a set that misses every page gets one message about the docs folder instead.
    records = [GoldenRecord(id="found", question="q", gold=["index"])]
    records += [GoldenRecord(id=f"r{i}", question="q", gold=[f"missing-{i}"]) for i in range(23)]
    with pytest.raises(InputError) as caught:
        validate_against_corpus(records, corpus)
    assert str(caught.value).startswith("23 problems:") and str(caught.value).rstrip().endswith("and 3 more")


# Shape --------------------------------------------------------------------------


def test_shape_counts_splits_forms_and_pages(corpus):
    shape = describe_golden(load_golden(DATA / "valid.yaml"), corpus)
    assert shape.records == 5
    assert shape.splits["dev"].model_dump() == {"positives": 1, "negatives": 1}
    assert shape.splits["test"].model_dump() == {"positives": 2, "negatives": 1}
    assert shape.gold_forms == {"page": 1, "page#": 1, "page#anchor": 1}
    # `guide` covers both guide pages; `guide/auth#` covers auth once more.
    assert shape.records_per_page == {"guide/auth": 2, "guide/deploy": 1, "index": 1}
    assert shape.pages == 4 and shape.untouched_pages == ["reference/cli"]
    assert any("moves by whole records: one record is 20.0 %" in w for w in shape.warnings)
    assert any("1 of 4 pages are touched by no question: reference/cli" in w for w in shape.warnings)
    assert not any("has no negatives" in w or "has no positives" in w for w in shape.warnings)


def test_shape_warns_about_one_sided_splits():
    records = [
        GoldenRecord(id="a", question="q", gold=["index"], split="dev"),
        GoldenRecord(id="b", question="q", split="test"),
    ]
    warnings = describe_golden(records).warnings
    assert "split 'dev' has no negatives: negatives caught and over-refusal cannot be measured on it" in warnings
    assert "split 'test' has no positives: retrieval and answer metrics have nothing to average on it" in warnings


def test_shape_of_a_large_set_has_no_size_warning():
    records = [GoldenRecord(id=str(i), question="q", gold=["index"] if i % 3 else [], split="dev" if i % 2 else "test")
               for i in range(120)]
    shape = describe_golden(records)
    assert shape.warnings == [] and shape.pages is None and shape.untouched_pages == []
    assert sum(s.positives + s.negatives for s in shape.splits.values()) == 120


# Any input gives a record list or a DocpilotError, never anything else ------------------

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
_FIELDS = st.sampled_from([*GoldenRecord.model_fields, *AttackProbe.model_fields]) | st.text(max_size=8)
_DATA = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_FIELDS, inner, max_size=6), max_leaves=25
)


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".yaml", ".jsonl"]))
def test_arbitrary_bytes_never_crash(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    for loader in (load_golden, load_probes):
        try:
            records = loader(path)
        except DocpilotError as exc:
            assert exc.exit_code == 2 and str(exc).strip()  # a message to show, and exit 2
        else:
            assert isinstance(records, list)


@FUZZ
@given(data=_DATA)
def test_arbitrary_yaml_data_never_crashes(tmp_path, data):
    path = tmp_path / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    for loader in (load_golden, load_probes):
        try:
            loader(path)
        except DocpilotError as exc:
            assert str(exc).startswith(str(path))


@FUZZ
@given(rows=st.lists(st.dictionaries(_FIELDS, _SCALARS | st.lists(_SCALARS, max_size=3), max_size=6), max_size=5))
def test_arbitrary_jsonl_records_never_crash(tmp_path, rows):
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    try:
        records = load_golden(path)
    except DocpilotError:
        return
    shape = describe_golden(records)
    assert sum(s.positives + s.negatives for s in shape.splits.values()) == len(records)


@FUZZ
@given(text=st.text(alphabet=string.printable + "ü€\t", max_size=200))
def test_arbitrary_text_never_crashes(tmp_path, text):
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        records = load_golden(path)
    except DocpilotError as exc:
        assert exc.exit_code == 2 and str(exc).strip()
    else:
        assert isinstance(records, list)
