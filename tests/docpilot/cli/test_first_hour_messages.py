"""What `docpilot eval` and `golden check` tell a new user, through the real command in child processes.

Each test pins one message of a first hour with DocPilot: where the HTML report is or
how to get it, which split an `--id` is in, how to write a missing probe file, the one
folder to pass when `--docs` misses every gold page, and how many records the cache gave.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from docpilot.golden.loading import load_probes
from docpilot.golden.probe_example import EXAMPLE
from tests.conftest import DATA
from tests.support.cli_runs import run_all

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"


@pytest.fixture
def project(tmp_path):
    """The pipeline fixture as a user's checkout: docs/ and golden.yaml side by side."""
    shutil.copytree(PIPELINE / "docs", tmp_path / "docs")
    shutil.copy(PIPELINE / "golden.yaml", tmp_path / "golden.yaml")
    return tmp_path


def _eval(*extra: str) -> list[str]:
    return ["eval", "--docs", "docs", "--golden", "golden.yaml", "--orchestrator", "inline", *extra]


def test_eval_says_how_to_get_the_html_report_or_where_it_is(project):
    runs = run_all({"plain": _eval("--gate-only", "--out", "plain.json"),
                    "html": _eval("--gate-only", "--out", "html.json", "--html", "page.html")}, cwd=project,
                   timeout=120)
    plain, html = runs["plain"], runs["html"]
    assert plain.returncode == 0, plain.stderr
    assert "html: not written; add --html report.html to this command, or run `docpilot report plain.json` " \
           "to write plain.html" in plain.stdout
    assert html.returncode == 0, html.stderr
    assert "html: page.html" in html.stdout and "not written" not in html.stdout
    assert (project / "page.html").is_file() and not (project / "plain.html").exists()


def test_an_id_of_another_split_names_that_split_and_the_fix(project):
    runs = run_all({"dev": _eval("--gate-only", "--split", "test", "--id", "install"),
                    "typo": _eval("--gate-only", "--split", "test", "--id", "rollbak")}, cwd=project, timeout=60)
    dev = runs["dev"]
    assert dev.returncode == 2 and "Traceback" not in dev.stderr
    assert "--split test --id: install is in the dev split, not in test" in dev.stderr
    assert "fix: run with --split dev" in dev.stderr
    typo = runs["typo"]  # an id no split holds is still a typo, with its near ids
    assert typo.returncode == 2 and "--id rollbak: no such record" in typo.stderr and "rollback" in typo.stderr
    assert not (project / "reports").exists()


def test_a_missing_probe_file_says_how_to_write_one(project):
    runs = run_all({"eval": _eval("--set", "adversarial", "--golden", "evals/adversarial.yaml"),
                    "check": ["golden", "check", "--set", "adversarial", "--adversarial", "probes.yaml"]},
                   cwd=project, timeout=60)
    for name, path in (("eval", "evals/adversarial.yaml"), ("check", "probes.yaml")):
        run = runs[name]
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert f"{path}: probe file not found" in run.stderr
        assert f"fix: create {path} with one probe per item, such as: {EXAMPLE}" in run.stderr
    assert not (project / "evals").exists()


def test_the_example_probe_is_a_valid_probe_file(tmp_path):
    path = tmp_path / "probes.yaml"
    path.write_text(EXAMPLE + "\n", encoding="utf-8")
    [probe] = load_probes(path)
    assert probe.expect == "refuse" and probe.forbidden == ["re:sk-[A-Za-z0-9]{20,}"]


@pytest.mark.parametrize(("given", "likely"), [(".", "docs"), ("docs/guide", "docs")],
                         ids=["one folder too shallow", "one folder too deep"])
def test_docs_that_miss_every_gold_page_give_one_message_with_the_folder(project, given, likely):
    runs = run_all({"check": ["golden", "check", "--docs", given, "--golden", "golden.yaml"],
                    "eval": ["eval", "--docs", given, "--golden", "golden.yaml", "--gate-only"]},
                   cwd=project, timeout=120)
    for name, run in runs.items():
        assert run.returncode == 2 and "Traceback" not in run.stderr, (name, run.stderr)
        assert "no gold entry names a page of the docs folder" in run.stderr, (name, run.stderr)
        assert f"fix: the gold pages are in {likely} (3 of 3 found there): pass --docs {likely}" in run.stderr
        assert "did you mean" not in run.stderr and "record '" not in run.stderr  # one message, not one per record
        assert run.stderr.count("fix:") == 1, run.stderr


def test_docs_elsewhere_entirely_still_get_one_message(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    (other / "readme.md").write_text("# Other\n\nNothing of Acme here.\n", encoding="utf-8")
    run = run_all({"check": ["golden", "check", "--docs", str(other), "--golden", "golden.yaml"]},
                  cwd=project)["check"]
    assert run.returncode == 2 and "none of the 3 gold pages (guide/auth, guide/deploy, index) is there" in run.stderr
    assert "point --docs (or corpus.docs) at the folder the gold page ids start from" in run.stderr


def test_wrong_anchors_on_pages_that_are_there_keep_one_message_per_record(project):
    records = yaml.safe_load((project / "golden.yaml").read_text(encoding="utf-8"))
    for record in records:
        record["gold"] = [f"{entry.partition('#')[0]}#renamed" for entry in record.get("gold") or []]
    (project / "golden.yaml").write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    run = run_all({"check": ["golden", "check", "--docs", "docs", "--golden", "golden.yaml"]}, cwd=project)["check"]
    assert run.returncode == 2 and "no gold entry names a page" not in run.stderr
    assert "gold entry 'guide/auth#renamed' names no section of page 'guide/auth'" in run.stderr
    assert "5 problems:" in run.stderr and run.stderr.count("did you mean") == 5  # one per gold entry


def test_the_scorecard_says_how_many_records_each_stage_reused(project):
    first = run_all({"r": _eval("--out", "1.json")}, cwd=project, timeout=120)["r"]
    assert first.returncode in (0, 1), first.stderr
    answered = [r for r in json.loads((project / "1.json").read_text())["rows"] if r["refused_by"] != "gate"]
    assert f"cache: retrieve reused 0 / computed 6, model reused 0 / computed {len(answered)}" in first.stdout
    records = yaml.safe_load((project / "golden.yaml").read_text(encoding="utf-8"))
    records[0]["question"] = "How do I install the Acme command line tool?"
    (project / "golden.yaml").write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    second = run_all({"r": _eval("--out", "2.json")}, cwd=project, timeout=120)["r"]
    assert second.returncode in (0, 1), second.stderr
    assert "cache: retrieve reused 5 / computed 1, model reused " in second.stdout
    assert f"model reused {len(answered) - 1} / computed 1" in second.stdout


def test_improve_compare_alone_compares_the_newest_run_with_its_previous_comparable_one(project):
    empty = run_all({"c": ["improve", "compare", "--reports", "reports"]}, cwd=project)["c"]
    assert empty.returncode == 2 and "no report in reports to compare" in empty.stderr
    for out in ("1.json", "2.json"):
        done = run_all({"e": _eval("--gate-only", "--out", f"reports/{out}")}, cwd=project, timeout=120)["e"]
        assert done.returncode == 0, done.stderr
    first, second = (json.loads((project / "reports" / name).read_text())["run_id"] for name in ("1.json", "2.json"))
    runs = run_all({"both": ["improve", "compare", "--reports", "reports"],
                    "one": ["improve", "compare", first, "--reports", "reports"]}, cwd=project)
    for run in runs.values():
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith(f"A: run {first} (") and f"\nB: run {second} (" in run.stdout
