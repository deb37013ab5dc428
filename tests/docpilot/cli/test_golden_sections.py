"""`docpilot golden sections` and the `page#(top)` gold entry, through the real command in child processes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from tests.support.cli_runs import run_all

pytestmark = pytest.mark.slow

INDEX = """\
Acme moves widgets between warehouses, quietly and on time.

# Acme

Acme is a command line tool.

## Install

Run pip install acme-cli to install it.

## Top

A heading whose slug is `top`.

## (top)

A heading whose slug is `top` too, so it becomes `top-1`.
"""

AUTH = """\
# Authentication

## Tokens

Export the token as ACME_TOKEN before you run any command.

## Rotating tokens

!!! tip
    Rotate a token every ninety days.
"""


@pytest.fixture
def project(tmp_path):
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "index.md").write_text(INDEX, encoding="utf-8")
    (docs / "guide" / "auth.md").write_text(AUTH, encoding="utf-8")
    (docs / "guide" / "audit.md").write_text("# Audit\n\nEvery command is logged.\n", encoding="utf-8")
    return tmp_path


def _golden(project, *records: dict) -> str:
    path = project / "golden.jsonl"
    path.write_text("".join(json.dumps({"split": "dev", **r}) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_sections_lists_every_id_with_heading_and_first_words(project):
    runs = run_all({"json": ["golden", "sections", "--docs", "docs", "--json"],
                    "table": ["golden", "sections", "--docs", "docs"]}, cwd=project,
                   envs={"table": {"COLUMNS": "200"}})  # wide enough that no cell wraps
    assert runs["json"].returncode == 0, runs["json"].stderr
    pages = json.loads(runs["json"].stdout)
    assert [p["id"] for p in pages] == ["guide/audit", "guide/auth", "index"]
    index = pages[2]["sections"]
    assert [s["id"] for s in index] == ["index#(top)", "index#acme", "index#install", "index#top", "index#top-1"]
    assert index[0] == {"id": "index#(top)", "heading": "(text above the first heading)", "level": 0,
                        "words": "Acme moves widgets between warehouses, quietly and on time.", "path": ["Acme"]}
    assert index[2]["path"] == ["Acme", "Install"]
    assert pages[1]["sections"][1]["words"] == "Export the token as ACME_TOKEN before you run any command."
    # The admonition's title ("Tip") is a label, not the section's first word.
    assert pages[1]["sections"][2]["words"] == "Rotate a token every ninety days."
    table = runs["table"]
    assert table.returncode == 0, table.stderr
    for text in ("index#(top)", "(text above the first heading)", "guide/auth#rotating-tokens", "Rotating tokens",
                 "heading path",
                 "Rotate a token every ninety days.", "3 pages, 9 sections"):
        assert text in table.stdout, text


def test_page_narrows_to_a_page_a_folder_or_the_start_of_an_id_and_grep_to_words(project):
    runs = run_all({
        "page": ["golden", "sections", "guide/auth", "--docs", "docs", "--json"],
        "folder": ["golden", "sections", "guide/", "--docs", "docs", "--json"],
        "start": ["golden", "sections", "guide/au", "--docs", "docs", "--json"],
        "file": ["golden", "sections", "guide/auth.md", "--docs", "docs", "--json"],
        "grep": ["golden", "sections", "--docs", "docs", "--grep", "acme_token EXPORT", "--json"],
        "none": ["golden", "sections", "--docs", "docs", "--grep", "kubernetes"],
        "wrong": ["golden", "sections", "guide/autth", "--docs", "docs"],
        "no docs": ["golden", "sections", "--docs", "nowhere"],
    }, cwd=project)
    ids = {name: [p["id"] for p in json.loads(runs[name].stdout)] for name in ("page", "folder", "start", "file")}
    assert ids == {"page": ["guide/auth"], "folder": ["guide/audit", "guide/auth"],
                   "start": ["guide/audit", "guide/auth"], "file": ["guide/auth"]}
    grep = json.loads(runs["grep"].stdout)
    assert [(p["id"], [s["id"] for s in p["sections"]]) for p in grep] == [("guide/auth", ["guide/auth#tokens"])]
    assert runs["none"].returncode == 1 and "no section mentions all of: kubernetes" in runs["none"].stderr
    wrong = runs["wrong"]
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "no page or folder 'guide/autth'" in wrong.stderr and "did you mean guide/auth" in wrong.stderr
    missing = runs["no docs"]
    assert missing.returncode == 2 and "nowhere: docs folder does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_top_pins_the_text_above_the_first_heading_and_nothing_else(project):
    gold_top = _golden(project, {"id": "widgets", "question": "What does Acme move between warehouses?",
                                 "gold": ["index#(top)"], "gold_answer": "Widgets."})
    no_top = project / "bad.jsonl"
    no_top.write_text(json.dumps({"id": "t", "question": "Which variable holds the token?",
                                  "gold": ["guide/auth#(top)"], "split": "dev"}) + "\n", encoding="utf-8")
    runs = run_all({
        "check": ["golden", "check", "--docs", "docs", "--golden", gold_top],
        "bad": ["golden", "check", "--docs", "docs", "--golden", str(no_top)],
        "eval": ["eval", "--docs", "docs", "--golden", gold_top, "--gate-only", "--json", "--out", "r.json"],
    }, cwd=project, timeout=120)
    assert runs["check"].returncode == 0, runs["check"].stderr
    bad = runs["bad"]
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "gold entry 'guide/auth#(top)' names text above the first heading, and page 'guide/auth' has none" \
        in bad.stderr
    assert runs["eval"].returncode in (0, 1), runs["eval"].stderr
    row = json.loads((project / "r.json").read_text(encoding="utf-8"))["rows"][0]
    assert row["gold"] == ["index#(top)"]
    ranks = [i for i, section in enumerate(row["retrieved"], start=1) if section == "index#"]
    assert ranks  # the preamble's section id stays `index#` in rows; only the gold entry spells it (top)
    summary = json.loads(runs["eval"].stdout)["summary"]
    assert summary["mrr"] == pytest.approx(1 / ranks[0])


# A command-line reference as Poetry writes it: an `Options` heading under each command.
CLI = """\
# Commands

## show

To list all the available packages, you can use the `show` command.

### Options

* `--tree`: List the dependencies as a tree.

## self

### self show

The `self show` command behaves similar to the show command, within Poetry's runtime environment.

#### Options

* `--addons`: List only add-on packages installed.

## env remove

#### Options { #options-for-removing-every-virtual-environment-of-the-current-project-at-once }

* `--all`: Remove all virtual environments at once.
"""


def _sections(tmp_path, *args: str, columns: int = 80):
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "cli.md").write_text(CLI, encoding="utf-8")
    return CliRunner().invoke(main, ["golden", "sections", "--docs", str(docs), *args], env={"COLUMNS": str(columns)},
                              catch_exceptions=False)


# Regression: `cli#options` and `cli#options-1` both read "Options" with the same first words.
def test_sections_with_the_same_heading_are_told_apart_by_their_heading_path(tmp_path):
    result = _sections(tmp_path, "--json")
    paths = {s["id"]: s["path"] for s in json.loads(result.output)[0]["sections"]}
    assert paths["cli#options"] == ["Commands", "show", "Options"]
    assert paths["cli#options-1"] == ["Commands", "self", "self show", "Options"]
    table = _sections(tmp_path, columns=160).output
    assert "show › Options" in table and "self › self show › Options" in table


# Regression: one 141-character id set the id column's width, leaving ~15 characters for the rest.
def test_the_table_keeps_to_the_terminal_width_and_wraps_a_long_id_whole(tmp_path):
    long_id = "cli#options-for-removing-every-virtual-environment-of-the-current-project-at-once"
    for columns in (80, 100):
        lines = _sections(tmp_path, columns=columns).output.splitlines()[1:]  # under the title (the folder's path)
        assert max(len(line) for line in lines) <= columns
        cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
        start = next(i for i, cell in enumerate(cells) if cell.startswith("cli#options-for"))
        joined = ""
        for cell in cells[start:]:
            joined += cell
            if len(joined) >= len(long_id):
                break
        assert joined == long_id  # every character of the id is there, in order, for copying
        words = next(line for line in lines if "cli#options-1 " in line).split("│")[3]
        assert len(words.strip()) >= 20  # the first words keep room beside the long id


def test_grep_matches_the_heading_path_too(tmp_path):
    found = json.loads(_sections(tmp_path, "--grep", "self addons", "--json").output)
    assert [s["id"] for s in found[0]["sections"]] == ["cli#options-1"]  # "self" only in its parents' headings
    assert [s["id"] for s in json.loads(_sections(tmp_path, "--grep", "show tree", "--json").output)[0]["sections"]] \
        == ["cli#options"]
    assert _sections(tmp_path, "--grep", "env addons").exit_code == 1
