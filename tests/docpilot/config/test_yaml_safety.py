"""Hand-written YAML: alias bombs and huge values cannot take a CI runner down; values are as PyYAML builds them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.errors import InputError
from docpilot.userfiles.userfile import MAX_ALIAS_VALUES, _Loader, parse_yaml, show


def _bomb(levels: int = 9) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    previous = "a"
    for name in "bcdefghijklmnop"[: levels - 1]:
        text += f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]\n"
        previous = name
    return text + f"records: *{previous}\n"


# Regression: 541 bytes of nested aliases ran for 30 s past 2.4 GB, then died with MemoryError.
def test_an_alias_bomb_is_refused_before_it_is_expanded():
    with pytest.raises(InputError, match="aliases expand to more than") as caught:
        parse_yaml(_bomb(), Path("golden.yaml"))
    assert "golden.yaml" in str(caught.value) and "fix:" in str(caught.value)


def test_golden_check_refuses_an_alias_bomb_with_exit_2(tmp_path):
    golden = tmp_path / "golden.yaml"
    golden.write_text(_bomb())
    started = time.process_time()
    result = CliRunner().invoke(main, ["golden", "check", "--golden", str(golden)])
    assert result.exit_code == 2, result.output
    assert "aliases expand" in result.stderr and "MemoryError" not in result.output
    assert time.process_time() - started < 30  # a bound, not a timing: the bomb took 30 s and then died


def test_ordinary_anchors_and_merge_keys_still_work():
    text = "defaults: &d {split: dev}\nrecords:\n" + "".join(
        f"  - {{<<: *d, id: q{i}, question: hi}}\n" for i in range(1000)
    )
    _, data = parse_yaml(text, Path("g.yaml"))
    assert len(data["records"]) == 1000 and data["records"][7]["split"] == "dev"


def test_the_budget_is_on_values_added_by_aliases():
    aliases = ",".join(["*a"] * (MAX_ALIAS_VALUES // 1000 + 1))
    just_over = "a: &a [" + ",".join(["1"] * 1000) + "]\nb: [" + aliases + "]\n"
    with pytest.raises(InputError, match="aliases expand"):
        parse_yaml(just_over, Path("g.yaml"))


def test_a_self_referring_alias_is_refused():
    with pytest.raises(InputError, match="refers to its own anchor"):
        parse_yaml("a: &a [1, *a]\n", Path("g.yaml"))


# Regression: a record's repr() was built whole before it was cut to 60 characters.
def test_show_looks_only_at_what_it_shows():
    huge = ["x" * 1000] * 1_000_000  # a repr of this would be a gigabyte
    shown = show({"question": huge})
    assert shown.startswith("{'question': ['xxxx") and shown.endswith("...") and len(shown) == 60
    assert show("short") == "'short'" and show([1, 2]) == "[1, 2]" and show({"a": 1}) == "{'a': 1}"


# Regression: a 50 MB question was accepted by eval, while the server limits a question's length.
def test_eval_refuses_a_question_over_the_servers_limit(tmp_path):
    from docpilot.api.schema import MAX_QUESTION_CHARS as SERVER_LIMIT
    from docpilot.schema import MAX_QUESTION_CHARS
    from tests.conftest import DATA

    assert MAX_QUESTION_CHARS == SERVER_LIMIT
    golden = tmp_path / "golden.yaml"
    golden.write_text(f"- id: long\n  question: {'x' * (MAX_QUESTION_CHARS + 1)}\n  gold: [index]\n")
    docs = DATA / "pipeline" / "docs"
    result = CliRunner().invoke(main, ["eval", "--docs", str(docs), "--golden", str(golden), "--gate-only",
                                       "--orchestrator", "inline", "--out", str(tmp_path / "r.json")])
    assert result.exit_code == 2, result.output
    assert f"the limit is {MAX_QUESTION_CHARS}" in result.stderr and "golden.yaml" in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_page_whose_front_matter_is_an_alias_bomb_is_refused(tmp_path):
    from docpilot.corpus.pages import load_corpus
    from docpilot.errors import CorpusError

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("---\n" + _bomb().replace("records:", "title:") + "---\n# Home\n")
    with pytest.raises(CorpusError, match="aliases expand") as caught:
        load_corpus(docs)
    assert "index.md" in str(caught.value)


@pytest.mark.parametrize("text", [
    "- id: a\n  question: No\n  n: 3\n  f: 1.5\n  t: true\n  z: null\n  e: ~\n  d: 2024-05-01\n  y: yes\n  l: [1, two, 3.0]\n",
    "records:\n  - {id: x, question: 'q?', gold: [a#b], tags: []}\n  - id: y\n    question: |\n      two\n      lines\n",
    "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
    "a: !!str 123\nb: !!int '7'\nc: !!float '2'\n",
    "1: one\n2.5: two\ntrue: three\nnull: four\n",
    "x: '*not an alias'\nx: again\n",
    "- [a, [b, [c, {d: [e]}]]]\n",
])
def test_values_are_those_pyyamls_constructor_builds(text):
    # Lists, mappings and strings are built without PyYAML's constructor; the values must not differ.
    loader = _Loader(text)
    try:
        expected = loader.get_single_data()
    finally:
        loader.dispose()
    _, value = parse_yaml(text, Path("golden.yaml"))
    assert value == expected and type(value) is type(expected)
