"""docpilot eval --repeat N: the flag sets model.repeat, and gates.rule in a config is read, not taken for a metric."""

from __future__ import annotations

from click.testing import CliRunner

from docpilot.cli import main
from docpilot.reports.report import load_report
from tests.conftest import DATA
from tests.support.openai_server import Reply

PIPELINE = DATA / "pipeline"
BASE = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml"), "--orchestrator", "inline"]


def _eval(tmp_path, base_url, *args: str):
    return CliRunner().invoke(main, ["eval", *BASE, "--provider", "openai", "--base-url", base_url, "--json",
                                     "--out", str(tmp_path / "r.json"), *args], catch_exceptions=False)


def test_repeat_asks_each_turn_n_times_and_a_rerun_none(tmp_path, openai_server):
    base_url, script = openai_server
    script.reset(Reply(answer="REFUSE: not-answerable"))
    config = tmp_path / "rule.yaml"
    config.write_text("gates:\n  rule: majority\n")
    first = _eval(tmp_path, base_url, "--repeat", "3", "--config", str(config))
    assert first.exit_code in (0, 1), first.output
    report = load_report(tmp_path / "r.json")
    records = len({r.id for r in report.rows})
    asked = len(script.turns)
    assert asked == 3 * records and {r.sample for r in report.rows} == {0, 1, 2}
    assert report.config["model"]["repeat"] == 3 and report.config["gates"] == {"rule": "majority"}
    assert "rule" not in {gate.metric for gate in report.gates}
    again = _eval(tmp_path, base_url, "--repeat", "3", "--config", str(config))
    assert again.exit_code == first.exit_code and len(script.turns) == asked


def test_an_unknown_rule_exits_2_naming_the_rules(tmp_path, openai_server):
    base_url, script = openai_server
    config = tmp_path / "rule.yaml"
    config.write_text("gates:\n  rule: most\n")
    result = _eval(tmp_path, base_url, "--config", str(config))
    assert result.exit_code == 2 and "mean, majority, all" in result.output
    assert script.turns == []


def test_variants_each_ask_their_samples_and_pair_records_on_their_means(tmp_path, openai_server):
    base_url, script = openai_server
    script.reset(Reply(answer="REFUSE: not-answerable"))
    result = _eval(tmp_path, base_url, "--repeat", "2", "--variant", "one=model.name=coin-one",
                   "--variant", "two=model.name=coin-two")
    assert result.exit_code in (0, 1), result.output
    report = load_report(tmp_path / "r.json")
    records = len({r.id for r in report.rows})
    assert len(script.turns) == 2 * 2 * records  # two variants, two samples of each record
    assert sorted({(r.variant, r.sample) for r in report.rows}) == [(v, s) for v in ("one", "two") for s in (0, 1)]
    assert all(test.n <= records for test in report.paired.tests)  # records paired, never samples
    # Each variant keeps its own stability and intervals by page, over its own rows.
    for variant in report.variants:
        assert variant.stability is not None and (variant.stability.samples, variant.stability.records) == (2, records)
        assert variant.intervals and "recall@8" in variant.intervals
