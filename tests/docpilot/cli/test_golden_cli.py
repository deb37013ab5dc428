"""`docpilot golden check` and the error edge every command shares."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.cli._errors import handle_errors
from docpilot.errors import InputError
from docpilot.golden.shape import GoldenShape

DATA = Path(__file__).resolve().parents[2] / "data" / "golden"
DOCS = DATA / "docs"
ERROR_CASES = yaml.safe_load((DATA / "error_cases.yaml").read_text(encoding="utf-8"))


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """An empty working directory, so no config file is picked up and nothing written goes unnoticed."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def _check(*args: str):
    return CliRunner().invoke(main, ["golden", "check", *args])


def _shape(stdout: str) -> GoldenShape:
    """The set's shape in `golden check --json`, with what each split can detect."""
    shape = GoldenShape.model_validate(json.loads(stdout))
    assert set(shape.detectable) == {"test", "alpha", "power", "assumed_discordance", "splits", "change",
                                     "records_needed"}
    return shape


# Valid sets ---------------------------------------------------------------------


def test_valid_set_prints_its_shape_and_warnings(workdir):
    result = _check("--golden", str(DATA / "valid.yaml"), "--docs", str(DOCS))
    assert result.exit_code == 0, result.output
    assert "5 records" in result.stdout and "(4 pages)" in result.stdout
    assert "page 1, page# 1, page#anchor 1" in result.stdout
    assert "warning" in result.stdout and "one record is 20.0 %" in result.stdout.replace("\n", " ")
    assert _files(workdir) == []


def test_json_output_is_the_shape(workdir):
    result = _check("--golden", str(DATA / "valid.jsonl"), "--docs", str(DOCS), "--json")
    assert result.exit_code == 0, result.output
    shape = _shape(result.stdout)
    assert shape.records == 2 and shape.splits["test"].negatives == 1
    assert shape.untouched_pages == ["guide/auth", "guide/deploy", "reference/cli"]
    # What each split can detect, under its own key: a positive in dev, a negative in test.
    splits = json.loads(result.stdout)["detectable"]["splits"]
    assert {split: {o: f["n"] for o, f in outcomes.items()} for split, outcomes in splits.items()} == {
        "dev": {"recall@8": 1, "refusal_correct": 1}, "test": {"recall@8": 0, "refusal_correct": 1}}
    assert all(f["detectable"] is None for outcomes in splits.values() for f in outcomes.values())  # too few


def test_paths_come_from_the_config_file(workdir):
    config = workdir / "my.yaml"
    config.write_text(f"golden: {DATA / 'valid.yaml'}\ncorpus:\n  docs: {DOCS}\n", encoding="utf-8")
    result = _check("--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["records"] == 5


def test_probes_are_checked_with_set_adversarial(workdir):
    result = _check("--set", "adversarial", "--adversarial", str(DATA / "probes.yaml"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"probes": 2, "expect": {"refuse": 1, "safe-answer": 1}, "splits": {"test": 2}}
    shown = _check("--set", "adversarial", "--adversarial", str(DATA / "probes.yaml"))
    assert shown.exit_code == 0 and "2 attack probes" in shown.stdout


# Broken input: exit 2, one message on stderr, nothing on stdout, nothing written -------------


def _assert_input_error(result, workdir: Path, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr and "fix: " in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert _files(workdir) == []


@pytest.mark.parametrize("case", ERROR_CASES, ids=[case["file"] for case in ERROR_CASES])
def test_broken_golden_set_exits_2(workdir, case):
    path = DATA / case["file"]
    result = _check("--golden", str(path), "--docs", str(DOCS))
    where = f"{path}:{case['line']}" if case["line"] else str(path)
    record = f"record {case['record']!r}" if case["record"] else ""
    _assert_input_error(result, workdir, f"error: {where}", record, case["message"], case["fix"])


def test_gold_missing_from_docs_exits_2(workdir):
    path = DATA / "wrong_docs.yaml"
    result = _check("--golden", str(path), "--docs", str(DOCS))
    _assert_input_error(result, workdir, f"{path}:4, record 'token'", "did you mean: guide/auth?")


def test_not_utf8_exits_2(workdir, tmp_path_factory):
    path = tmp_path_factory.mktemp("bad") / "golden.yaml"
    path.write_bytes(b"- id: a\n  question: caf\xe9\n")
    _assert_input_error(_check("--golden", str(path), "--docs", str(DOCS)), workdir, f"{path}:2", "not UTF-8")


def test_missing_golden_file_exits_2(workdir):
    _assert_input_error(_check("--golden", "nowhere.yaml", "--docs", str(DOCS)), workdir, "nowhere.yaml: file not found")


def test_missing_docs_folder_exits_2(workdir):
    result = _check("--golden", str(DATA / "valid.yaml"), "--docs", "no-docs")
    _assert_input_error(result, workdir, "no-docs")


def test_broken_probes_exit_2(workdir):
    path = DATA / "bad_probes.yaml"
    result = _check("--set", "adversarial", "--adversarial", str(path))
    _assert_input_error(result, workdir, f"{path}:1, record 'leak'", f"{path}:4, record 'vague'")


def test_broken_config_exits_2(workdir):
    config = workdir / "bad.yaml"
    config.write_text("golden: x.yaml\nretreival:\n  top_k: 3\n", encoding="utf-8")
    result = _check("--config", str(config))
    assert result.exit_code == 2 and result.stdout == ""
    assert f"error: {config}:2: unknown option 'retreival'" in result.stderr
    assert "did you mean 'retrieval'?" in result.stderr


# The error edge -------------------------------------------------------------------


@click.command()
@click.argument("kind")
@handle_errors
def _raising(kind: str) -> None:
    if kind == "input":
        raise InputError("bad value", path="f.yaml", line=3, record="r1", hint="write a good one")
    if kind == "bug":
        raise KeyError("surprise\nsecond line")
    if kind == "usage":
        raise click.UsageError("wrong flag")
    click.echo("fine")


def test_docpilot_error_becomes_message_and_its_exit_code():
    result = CliRunner().invoke(_raising, ["input"])
    assert result.exit_code == 2
    assert result.stderr == "error: f.yaml:3, record 'r1': bad value\n  fix: write a good one\n"


def test_unexpected_error_is_one_line_and_exit_3(monkeypatch):
    monkeypatch.delenv("DOCPILOT_DEBUG", raising=False)
    result = CliRunner().invoke(_raising, ["bug"])
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("internal error: KeyError")
    assert "DOCPILOT_DEBUG=1" in result.stderr and "Traceback" not in result.stderr


def test_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setenv("DOCPILOT_DEBUG", "1")
    result = CliRunner().invoke(_raising, ["bug"])
    assert result.exit_code == 3 and "Traceback" in result.stderr and "internal error: KeyError" in result.stderr


def test_click_usage_errors_and_success_pass_through():
    assert CliRunner().invoke(_raising, ["usage"]).exit_code == 2
    assert "wrong flag" in CliRunner().invoke(_raising, ["usage"]).stderr
    ok = CliRunner().invoke(_raising, ["ok"])
    assert ok.exit_code == 0 and ok.stdout == "fine\n"


def test_works_as_a_context_manager():
    @click.command()
    def command() -> None:
        with handle_errors():
            raise InputError("nope")

    result = CliRunner().invoke(command)
    assert result.exit_code == 2 and result.stderr == "error: nope\n"


# One pass, errors and warnings apart -----------------------------------------------


def test_warnings_are_listed_apart_and_do_not_fail_the_check(workdir):
    path = DATA / "negative_with_answer.yaml"
    result = _check("--golden", str(path), "--docs", str(DOCS), "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"warning: {path}:1, record 'pricing': a negative (empty gold) carries a "
                                    "gold_answer")
    shape = _shape(result.stdout)
    assert len(shape.record_warnings) == 1 and "never scored" in shape.record_warnings[0]


def test_a_csv_set_checks_like_its_yaml_twin(workdir):
    from_csv = _check("--golden", str(DATA / "valid.csv"), "--docs", str(DOCS), "--json")
    from_yaml = _check("--golden", str(DATA / "valid.yaml"), "--docs", str(DOCS), "--json")
    assert from_csv.exit_code == from_yaml.exit_code == 0
    csv_shape, yaml_shape = (_shape(r.stdout) for r in (from_csv, from_yaml))
    assert csv_shape.model_dump(exclude={"record_warnings"}) == yaml_shape.model_dump(exclude={"record_warnings"})


def test_schema_and_gold_entry_errors_come_in_one_run_with_the_warnings_after(workdir, tmp_path):
    # Regression: gold-entry errors showed only once the schema errors were fixed and the check run again.
    path = tmp_path / "golden.yaml"
    path.write_text("- {id: a, question: Q?, gold: [index], split: train}\n"
                    "- {id: b, question: Q?, gold: [guide/nowhere], gold_answer: A.}\n"
                    "- {id: c, question: Q?}\n", encoding="utf-8")
    result = _check("--golden", str(path), "--docs", str(DOCS))
    assert result.exit_code == 2 and result.stdout == ""
    err = result.stderr
    assert "2 problems:" in err and "split is text 'train'" in err and "'guide/nowhere' names no page" in err
    assert err.index("guide/nowhere") < err.index("and 1 warning(s), which do not stop a run:")
    assert f"{path}:3, record 'c': a negative has no expected_cause" in err
