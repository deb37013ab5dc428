"""`docpilot eval --id/--tag/--limit`, the report's slices, and golden sets as users bring them."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from click.testing import CliRunner
from docpilot.metrics import registry

from docpilot.cli import main
from docpilot.reports.report import load_report
from tests.conftest import DATA, ROOT, SHARED_DATA

PIPELINE = DATA / "pipeline"
TAGS = {"install": ["setup"], "token-env": ["auth", "setup"], "rollback": ["deploy"], "rotate": ["auth"],
        "neg-pricing": ["off-docs"], "neg-kubernetes": ["off-docs", "deploy"]}


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def golden(tmp_path):
    records = yaml.safe_load((PIPELINE / "golden.yaml").read_text(encoding="utf-8"))
    for record in records:
        record["tags"] = TAGS[record["id"]]
    path = tmp_path / "golden.yaml"
    path.write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    return path


def evaluate(golden, out, *extra: str):
    result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--orchestrator", "inline",
                 "--out", str(out), "--json", *extra)
    assert result.exit_code in (0, 1), result.output
    return load_report(out), result


def untimed(summary: dict) -> dict:
    """The summary without times, which differ between any two runs."""
    return {m: v for m, v in summary.items() if not (registry.is_metric_id(m) and registry.get(m).family == "latency")
            and not m.startswith("stage_")}


def test_id_is_repeatable_and_keeps_file_order(golden, tmp_path):
    report, _ = evaluate(golden, tmp_path / "r.json", "--id", "rollback", "--id", "install")
    assert [row.id for row in report.rows] == ["install", "rollback"]
    assert report.selection.ids == ["rollback", "install"]
    assert report.selection.describe() == "--id rollback --id install"


def test_tag_keeps_records_with_any_of_the_tags_and_limit_the_first_n(golden, tmp_path):
    report, _ = evaluate(golden, tmp_path / "r.json", "--tag", "auth", "--tag", "deploy", "--gate-only")
    assert [row.id for row in report.rows] == ["token-env", "rollback", "rotate", "neg-kubernetes"]
    report, _ = evaluate(golden, tmp_path / "l.json", "--tag", "auth", "--limit", "1", "--gate-only")
    assert [row.id for row in report.rows] == ["token-env"] and report.selection.limit == 1
    report, _ = evaluate(golden, tmp_path / "s.json", "--split", "test", "--limit", "2", "--gate-only")
    assert [row.id for row in report.rows] == ["rollback", "rotate"]


def test_rows_carry_their_tags_and_slices_equal_the_tag_runs(golden, tmp_path):
    full, _ = evaluate(golden, tmp_path / "full.json")
    assert {row.id: row.tags for row in full.rows} == TAGS
    assert sorted(full.slices) == ["auth", "deploy", "off-docs", "setup"]
    for tag, piece in full.slices.items():
        alone, _ = evaluate(golden, tmp_path / f"{tag}.json", "--tag", tag)
        assert piece.records == len(alone.rows)
        assert untimed(piece.summary) == untimed(alone.summary), tag
        assert piece.counts == alone.counts, tag


def test_a_wrong_id_or_tag_exits_2_naming_the_choices_and_writes_nothing(golden, tmp_path):
    out = tmp_path / "r.json"
    result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--gate-only",
                 "--out", str(out), "--id", "instal")
    assert result.exit_code == 2 and "--id instal: no such record" in result.stderr
    assert "did you mean install?" in result.stderr
    result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--gate-only",
                 "--out", str(out), "--tag", "billing")
    assert result.exit_code == 2 and "tags in use: auth, deploy, off-docs, setup" in result.stderr
    result = run("eval", "--docs", str(PIPELINE / "docs"), "--golden", str(golden), "--gate-only",
                 "--out", str(out), "--id", "install", "--tag", "deploy")
    assert result.exit_code == 2 and "keeps no record" in result.stderr
    assert not out.exists()


def test_status_compares_only_runs_with_the_same_selection(golden, tmp_path):
    reports = tmp_path / "reports"
    evaluate(golden, reports / "20260101T000000Z-aaaaaa.json", "--gate-only")
    evaluate(golden, reports / "20260101T000001Z-bbbbbb.json", "--gate-only", "--tag", "auth")
    result = run("status", "--reports", str(reports), "--json")
    payload = json.loads(result.stdout)
    assert payload["previous"] is None and payload["report"]["selection"] == "--tag auth"
    assert payload["skipped"][0]["selection"] == "all records"


def test_the_same_records_as_csv_give_the_same_summary_as_yaml(golden, tmp_path):
    records = yaml.safe_load(golden.read_text(encoding="utf-8"))
    fields = ["id", "question", "gold", "gold_answer", "identifiers", "split", "expected_cause", "tags"]
    path = tmp_path / "golden.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for record in records:
            writer.writerow([";".join(v) if isinstance(v := record.get(f, ""), list) else v for f in fields])
    from_yaml, _ = evaluate(golden, tmp_path / "y.json")
    from_csv, _ = evaluate(path, tmp_path / "c.json")
    assert untimed(from_csv.summary) == untimed(from_yaml.summary)
    assert from_csv.counts == from_yaml.counts and from_csv.slices.keys() == from_yaml.slices.keys()


def test_negatives_with_a_gold_answer_run_with_a_warning(golden, tmp_path):
    records = yaml.safe_load(golden.read_text(encoding="utf-8"))
    for record in records:
        if not record.get("gold"):
            record["gold_answer"] = "The docs do not cover this."
    golden.write_text(yaml.safe_dump(records, sort_keys=False), encoding="utf-8")
    report, result = evaluate(golden, tmp_path / "r.json")
    assert (f"warning: {golden}: 2 negatives carry a gold_answer: kept and shown with the record, never scored "
            "(neg-pricing, neg-kubernetes)") in result.stderr
    negative = next(row for row in report.rows if row.id == "neg-pricing")
    assert negative.gold_answer == "The docs do not cover this."
    assert report.counts["answer_f1"] == 4  # the positives only


# On real docs: the FastAPI set, its negatives given reference answers as other tools write them.

FASTAPI_DOCS = SHARED_DATA / "fastapi-docs" / "docs" / "en" / "docs"
FASTAPI_GOLDEN = ROOT / "benchmarks" / "data" / "fastapi-golden.yaml"


@pytest.fixture
def fastapi_golden(tmp_path):
    if not FASTAPI_DOCS.is_dir():
        pytest.skip(f"{FASTAPI_DOCS} is absent (the shared data lives beside the repository)")
    records = yaml.safe_load(FASTAPI_GOLDEN.read_text(encoding="utf-8"))
    for record in records:
        if not record.get("gold"):
            record["gold_answer"] = "The FastAPI documentation does not cover this."
    path = tmp_path / "fastapi.yaml"
    path.write_text(yaml.safe_dump(records, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path, records


def _gate_only(golden, out, *extra):
    result = run("eval", "--docs", str(FASTAPI_DOCS), "--golden", str(golden), "--gate-only",
                 "--orchestrator", "inline", "--out", str(out), "--json", *extra)
    assert result.exit_code in (0, 1), result.output
    return load_report(out), result


@pytest.mark.slow
def test_on_real_docs_negatives_with_answers_run_and_csv_matches_yaml(fastapi_golden, tmp_path):
    path, records = fastapi_golden
    negatives = [r["id"] for r in records if not r.get("gold")]
    report, result = _gate_only(path, tmp_path / "yaml.json")
    assert f"{len(negatives)} negatives carry a gold_answer: kept and shown with the record, never scored" \
        in result.stderr
    assert len(report.rows) == len(records)
    fields = ["id", "question", "gold", "gold_answer", "identifiers", "split", "expected_cause", "scope", "tags"]
    csv_path = tmp_path / "fastapi.csv"
    with csv_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for record in records:
            writer.writerow([";".join(v) if isinstance(v := record.get(f) or "", list) else v for f in fields])
    from_csv, _ = _gate_only(csv_path, tmp_path / "csv.json")
    assert untimed(from_csv.summary) == untimed(report.summary) and from_csv.counts == report.counts
    tag = max(report.slices, key=lambda t: report.slices[t].records)  # the largest slice
    alone, _ = _gate_only(path, tmp_path / "tag.json", "--tag", tag)
    assert untimed(report.slices[tag].summary) == untimed(alone.summary)
