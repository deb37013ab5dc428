"""Numbers that are no numbers, or out of their option's range, through the real command line.

From the config file the message names the file and line, from the environment the
variable, from a flag the flag; each exits 2 before any work, with no traceback.
Before, `retrieval.k1: .nan` ran to exit 0 with recall@8 0.000 and a report storing
`k1: null`, and `guard.threshold: .nan` turned the gate off without a word.
"""

from __future__ import annotations

import pytest

from tests.support.cli_runs import refusal, run_all

pytestmark = pytest.mark.slow

GOLDEN = """\
- id: q1
  question: How do I rotate a token?
  gold: [tokens]
  gold_answer: Run the rotate command.
  split: dev
- id: n1
  question: What is the weather on Mars?
  gold: []
  expected_cause: out-of-scope
  split: dev
"""

CONFIGS = {
    "k1-nan.yaml": "retrieval:\n  retriever: bm25\n  k1: .nan\n",
    "threshold-nan.yaml": "guard:\n  mode: \"on\"\n  threshold: .nan\n",
    "b-out-of-range.yaml": "retrieval:\n  b: 1.5\n",
    "temperature-inf.yaml": "model:\n  temperature: .inf\n",
    "concurrency-bool.yaml": "model:\n  concurrency: true\n",
    "gate-percent.yaml": "gates:\n  recall@8: \">= 80\"\n",
    "gate-infinite.yaml": "gates:\n  mrr: \">= 0.5\"\n  latency_p95: \"<= 1e999\"\n",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every command of this file, run once, by name."""
    work = tmp_path_factory.mktemp("numbers")
    docs = work / "docs"
    docs.mkdir()
    (docs / "tokens.md").write_text("# Tokens\n\nRun the rotate command to rotate a token.\n", encoding="utf-8")
    (work / "golden.yaml").write_text(GOLDEN, encoding="utf-8")
    for name, text in CONFIGS.items():
        (work / name).write_text(text, encoding="utf-8")
    run = ["eval", "--gate-only", "--orchestrator", "inline", "--docs", str(docs), "--golden", "golden.yaml",
           "--out", str(work / "report.json")]
    commands = {name: [*run, "--config", name] for name in CONFIGS}
    commands["env-b-nan"] = run
    commands["env-k1-inf"] = run
    commands["flag-concurrency-nan"] = [*run, "--concurrency", "nan"]
    commands["flag-concurrency-huge"] = [*run, "--concurrency", "5000"]
    commands["flag-target-nan"] = ["calibrate", "--docs", str(docs), "--golden", "golden.yaml", "--no-write",
                                   "--target", "nan"]
    envs = {"env-b-nan": {"DOCPILOT_RETRIEVAL__B": "nan"}, "env-k1-inf": {"DOCPILOT_RETRIEVAL__K1": ".inf"}}
    return run_all(commands, cwd=work, envs=envs, timeout=90)


# Regression: `retrieval.k1: .nan` ran to exit 0 with recall@8 0.000 and `k1: null` in the report.
def test_a_nan_k1_in_the_file_names_its_line(runs):
    message = refusal(runs["k1-nan.yaml"])
    assert "k1-nan.yaml:3: retrieval.k1 must be a finite number > 0, got nan" in message, message


# Regression: `guard.threshold: .nan` silently turned the gate off (no score is below nan).
def test_a_nan_gate_threshold_is_refused(runs):
    message = refusal(runs["threshold-nan.yaml"])
    assert "threshold-nan.yaml:3: guard.threshold must be a finite number >= -1, got nan" in message, message


# Regression: `retrieval.b: 1.5` was taken, though BM25's length normalisation is a share from 0 to 1.
def test_b_outside_0_to_1_is_refused(runs):
    message = refusal(runs["b-out-of-range.yaml"])
    assert "b-out-of-range.yaml:2: retrieval.b must be a finite number from 0 to 1, got 1.5" in message, message


# Regression: an infinite sampling temperature was taken.
def test_an_infinite_temperature_is_refused(runs):
    message = refusal(runs["temperature-inf.yaml"])
    assert "temperature-inf.yaml:2: model.temperature must be a finite number from 0 to 2, got inf" in message, message


# Regression: `concurrency: true` was read as 1.
def test_true_is_no_concurrency(runs):
    message = refusal(runs["concurrency-bool.yaml"])
    expected = "concurrency-bool.yaml:2: model.concurrency must be a whole number from 1 to 1,024, got true"
    assert expected in message, message


# Regression: a gate written as a percentage (`recall@8: ">= 80"`) failed every run, with exit 1.
def test_a_gate_threshold_outside_its_metrics_values_names_the_line(runs):
    message = refusal(runs["gate-percent.yaml"])
    assert "gate-percent.yaml:2: gate on 'recall@8': the threshold 80 is outside" in message, message
    assert "from 0 to 1" in message, message
    assert "did you mean 0.8?" in message, message


# Regression: `<= 1e999` is read as infinity, a gate that passes every run.
def test_an_infinite_gate_threshold_is_refused(runs):
    message = refusal(runs["gate-infinite.yaml"])
    assert "gate-infinite.yaml:3: gate on 'latency_p95'" in message, message
    assert "not a finite number" in message, message


# Regression: `DOCPILOT_RETRIEVAL__B=nan` ran to exit 0 with recall@8 0.000.
def test_nan_from_the_environment_names_the_variable(runs):
    message = refusal(runs["env-b-nan"])
    assert "DOCPILOT_RETRIEVAL__B='nan': retrieval.b must be a finite number from 0 to 1" in message, message
    assert "unset DOCPILOT_RETRIEVAL__B" in message, message


# Regression: `DOCPILOT_RETRIEVAL__K1=.inf` was taken as an infinite saturation.
def test_infinity_from_the_environment_names_the_variable(runs):
    message = refusal(runs["env-k1-inf"])
    assert "DOCPILOT_RETRIEVAL__K1='.inf': retrieval.k1 must be a finite number > 0, got inf" in message, message


def test_nan_as_a_concurrency_flag_is_a_usage_error(runs):
    message = refusal(runs["flag-concurrency-nan"])
    assert "Invalid value for '--concurrency'" in message, message
    assert "whole number from 1 to 1,024" in message, message


def test_a_concurrency_flag_above_the_options_range_is_a_usage_error(runs):
    message = refusal(runs["flag-concurrency-huge"])
    assert "Invalid value for '--concurrency': '5000' is not a whole number from 1 to 1,024" in message, message


# Regression: click's FloatRange let `--target nan` through (every comparison with nan is false).
def test_nan_as_the_calibration_target_is_a_usage_error(runs):
    message = refusal(runs["flag-target-nan"])
    assert "Invalid value for '--target': 'nan' is not a finite number > 0 and <= 1" in message, message
