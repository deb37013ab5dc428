"""`docpilot field`: a log of real-shaped turns over the demo docs, scored without gold, its gaps grouped.

The oracle is the plan the log was made from (``tests.support.field_log``): what was
planted in each turn, counted here with no code of the field package, and percentiles
and the Wilson bound computed by other means (sorting, statsmodels).
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import yaml
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from docpilot.cli import main
from docpilot.config.loading import load_config
from docpilot.field.gaps import MISSED, TO_WRITE
from docpilot.field.run import score_log
from tests.conftest import ROOT
from tests.support.field_log import (
    APP_MAPPING,
    LANGSMITH_MAPPING,
    MINTLIFY_MAPPING,
    THEMES,
    make_turns,
    write_app_log,
    write_langsmith_jsonl,
    write_mintlify_csv,
)

pytestmark = pytest.mark.slow  # each test opens the demo docs and their index (about a second)


def _config(mapping: dict, **extra):
    return load_config(overrides={"corpus": {"docs": str(ROOT / "docs")}, "logs": {"log": {**mapping, **extra}}})


def _nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) / 100)) - 1]


@pytest.fixture(scope="module")
def planted():
    return make_turns()


@pytest.fixture(scope="module")
def scored(planted, tmp_path_factory):
    folder = tmp_path_factory.mktemp("field")
    log = write_app_log(planted, folder / "app.jsonl")
    rows = folder / "turns.jsonl"
    report = score_log(_config(APP_MAPPING), log, rows_out=rows)
    return report, [json.loads(line) for line in rows.read_text().splitlines()]


def test_the_summary_agrees_with_what_was_planted(planted, scored):
    report, rows = scored
    summary = report["summary"]
    refused = sum(t.refused for t in planted)
    answered = len(planted) - refused
    assert summary["turns"] == len(planted) == len(rows)
    assert summary["refused"] == refused
    assert summary["refusal_rate"] == pytest.approx(refused / len(planted))
    upper = proportion_confint(refused, len(planted), alpha=0.10, method="wilson")[1]
    assert summary["refusal_rate_upper95"] == pytest.approx(upper, rel=1e-12)
    assert summary["hallucinated_citations"] == sum(t.truth["hallucinated"] for t in planted)
    assert summary["unlinked_answers"] == sum(t.truth["unlinked"] for t in planted)
    assert summary["sources_outside_docs"] == sum(t.truth["outside"] for t in planted)
    assert summary["uncited_answers"] == sum(t.truth["uncited"] for t in planted)
    mismatched = sum(t.truth["language_mismatch"] for t in planted)
    assert summary["language_match"] == pytest.approx((answered - mismatched) / answered)
    assert summary["conversations"] == len({t.conversation for t in planted})
    latencies = [t.latency_ms for t in planted]
    for p in (50, 95, 99):
        assert summary[f"latency_p{p}"] == _nearest_rank(latencies, p)
    painted = [t.first_token_ms for t in planted if not t.refused]
    assert summary["first_token_p50"] == _nearest_rank(painted, 50)
    assert summary["first_token_p95"] == _nearest_rank(painted, 95)


def test_each_turn_names_its_faults(planted, scored):  # noqa: C901
    _, rows = scored
    for turn, row in zip(planted, rows, strict=True):
        assert row["id"] == turn.id
        assert len(row["hallucinated"]) == turn.truth["hallucinated"]
        assert len(row["outside_docs"]) == turn.truth["outside"]
        assert row["refused"] == turn.refused
        if turn.truth["outside"]:
            assert row["outside_docs"] == ["blog/launch-week#"]
        if turn.sources and not turn.refused:
            assert row["sources"][0] == turn.sources[0].removeprefix("https://docpilot.dev/docs/")
        assert len(row["nearest"]) >= 1 or turn.truth["theme"] is not None
    by_conversation = Counter()
    for turn, row in zip(planted, rows, strict=True):
        by_conversation[turn.conversation] += 1
        assert row["turn"] == by_conversation[turn.conversation]


def test_off_topic_questions_group_by_theme_and_the_largest_is_a_page_to_write(planted, scored):
    # The themes are off topic only while the demo docs never name them.
    pages = " ".join(p.read_text(encoding="utf-8").lower() for p in (ROOT / "docs").rglob("*.md"))
    assert not [word for word in THEMES if word in pages], "a docs page names an off-topic theme of the test log"
    report, _ = scored
    theme_of = {q: theme for theme, questions in THEMES.items() for q in questions}
    asked = Counter(t.truth["theme"] for t in planted if t.truth["theme"] in THEMES)
    placed: dict[str, list[int]] = {}
    for group in report["gaps"]:
        themes = {theme_of.get(q["question"]) for q in group["questions"]}
        if themes & set(THEMES):
            assert len(themes) == 1, f"group {group['label']!r} mixes {themes}"
            placed.setdefault(themes.pop(), []).append(group["asks"])
    assert {theme: sum(asks) for theme, asks in placed.items()} == dict(asked)
    assert all(len(asks) == 1 for asks in placed.values())  # each theme is one group
    top = report["gaps"][0]
    assert top["rank"] == 1 and top["verdict"] == TO_WRITE and top["by"] == "words"
    assert "saml" in top["label"].lower() and top["asks"] == asked["saml"]
    assert [g["asks"] for g in report["gaps"]] == sorted((g["asks"] for g in report["gaps"]), reverse=True)


def test_a_refused_question_the_docs_answer_is_a_page_the_assistant_missed(planted, scored):
    report, rows = scored
    missed = [g for g in report["gaps"] if g["verdict"] == MISSED]
    assert missed and all(g["by"] == "page" for g in missed)
    for group in missed:
        assert all(n["section"].startswith(group["label"] + "#") for n in group["nearest"][:1])
    refused_near = {r["question"] for r in rows if r["refused"] and r["near"]}
    in_missed = {q["question"] for g in missed for q in g["questions"]}
    assert refused_near and refused_near <= in_missed | {q for g in report["gaps"] for q in
                                                         (x["question"] for x in g["questions"])}


def test_a_mintlify_csv_and_a_langsmith_export_load_from_config_alone(planted, scored, tmp_path):
    expected = scored[0]["summary"]
    mintlify = score_log(_config(MINTLIFY_MAPPING), write_mintlify_csv(planted, tmp_path / "mintlify.csv"))
    langsmith = score_log(_config(LANGSMITH_MAPPING), write_langsmith_jsonl(planted, tmp_path / "runs.jsonl"))
    for summary in (mintlify["summary"], langsmith["summary"]):
        for key in ("turns", "refused", "hallucinated_citations", "unlinked_answers", "sources_outside_docs",
                    "uncited_answers"):
            assert summary[key] == expected[key], key
    assert mintlify["summary"]["latency_p50"] is None  # the export carries no times: absent, not 0
    assert langsmith["summary"]["latency_p50"] == pytest.approx(expected["latency_p50"], abs=0.01)
    assert langsmith["summary"]["first_token_p95"] == pytest.approx(expected["first_token_p95"], abs=0.01)
    assert langsmith["summary"]["conversations"] == expected["conversations"]


def test_two_workers_give_what_one_gives(planted, tmp_path):
    # The log is cut between lines; conversations that cross a cut keep numbering their turns.
    log = write_app_log(planted, tmp_path / "app.jsonl")
    whole = tmp_path / "whole.jsonl"
    report = score_log(_config(APP_MAPPING), log, rows_out=whole)
    rows = [json.loads(line) for line in whole.read_text().splitlines()]
    out = tmp_path / "turns.jsonl"
    split = score_log(_config(APP_MAPPING), log, rows_out=out, workers=3)
    assert split["runtime"]["workers"] == 3
    assert split["summary"] == report["summary"]
    assert split["gaps"] == report["gaps"]
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
    assert not list(tmp_path.glob("*.part*"))


def test_redaction_happens_before_anything_is_stored(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "Why does jane.doe@example.com get no answer about ACCT-99812?",
                               "answer": "Write to jane.doe@example.com [1]", "sources": []}) + "\n")
    rows = tmp_path / "turns.jsonl"
    config = _config({"question": "question", "answer": "answer", "sources": "sources",
                      "redact": [r"[\w.]+@[\w.]+", r"ACCT-\d+"]})
    score_log(config, log, rows_out=rows)
    text = rows.read_text()
    assert "jane.doe" not in text and "ACCT-99812" not in text
    assert json.loads(text)["question"] == "Why does [redacted] get no answer about [redacted]?"


def test_a_bad_line_names_the_file_and_line_and_exits_2(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "fine"}\n{"question": \n')
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"docs": str(ROOT / "docs")},
                                      "logs": {"app": {"question": "question"}}}))
    result = CliRunner().invoke(main, ["field", str(log), "--config", str(config)])
    assert result.exit_code == 2
    assert f"{log}:2" in result.output and "not a JSON line" in result.output


def test_the_command_writes_the_report_and_the_turns(planted, tmp_path):
    log = write_app_log(planted[:40], tmp_path / "app.jsonl")
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"docs": str(ROOT / "docs")}, "logs": {"app": APP_MAPPING}}))
    out = tmp_path / "field.json"
    result = CliRunner().invoke(main, ["field", str(log), "--config", str(config), "--out", str(out),
                                       "--markdown", str(tmp_path / "field.md"), "--html", str(tmp_path / "f.html")])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["summary"]["turns"] == 40
    assert len((tmp_path / "field.turns.jsonl").read_text().splitlines()) == 40
    assert "## Coverage gaps" in (tmp_path / "field.md").read_text()
    page = (tmp_path / "f.html").read_text()
    assert "<h2>Coverage gaps</h2>" in page and report["gaps"][0]["label"] in page


def test_the_html_page_escapes_what_users_typed(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"question": "<script>alert(1)</script> zqxv wobble", "answer": None}) + "\n")
    report = score_log(_config({"question": "question", "answer": "answer"}), log)
    from docpilot.field.html import field_html

    page = field_html(report)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; zqxv wobble" in page


def test_an_export_whose_sources_are_its_citations_reads_them_as_such(tmp_path):
    log = tmp_path / "export.jsonl"
    shown = [{"title": "Gates", "url": "https://docpilot.dev/docs/gates"},
             {"title": "Blog", "url": "https://docpilot.dev/docs/blog/launch"}]
    log.write_text(json.dumps({"query": "How do gates fail a run?", "response": "A failed gate fails the run.",
                               "sources": shown}) + "\n")
    rows = tmp_path / "turns.jsonl"
    mapping = {"question": "query", "answer": "response", "sources": "sources", "citations": "sources",
               "source_id": "url", "source_ids": {"base_url": "https://docpilot.dev/docs/"}}
    report = score_log(_config(mapping), log, rows_out=rows)
    row = json.loads(rows.read_text())
    assert row["citations"] == ["gates", "blog/launch#"] and row["links"] == 2 and row["hallucinated"] == []
    assert row["outside_docs"] == ["blog/launch#"]
    assert report["summary"]["unlinked_answers"] == report["summary"]["uncited_answers"] == 0
    unmarked = score_log(_config({k: v for k, v in mapping.items() if k != "citations"}), log)
    assert unmarked["summary"]["unlinked_answers"] == unmarked["summary"]["uncited_answers"] == 1


def test_a_gap_group_drafts_records_that_golden_accept_takes(scored, tmp_path):
    report, _ = scored
    saved = tmp_path / "field.json"
    saved.write_text(json.dumps(report))
    drafts = tmp_path / "drafts.yaml"
    runner = CliRunner()
    result = runner.invoke(main, ["field-draft", str(saved), "--group", "1", "--out", str(drafts)])
    assert result.exit_code == 0, result.output
    written = yaml.safe_load(drafts.read_text())
    top = report["gaps"][0]
    assert [d["question"] for d in written] == [q["question"] for q in top["questions"][:10]]
    assert all(d["gold"] == [] and d["expected_cause"] == "not-answerable" for d in written)  # a page to write
    missed = next(g for g in report["gaps"] if g["verdict"] == MISSED)
    result = runner.invoke(main, ["field-draft", str(saved), "--group", str(missed["rank"]), "--out", str(drafts)])
    assert result.exit_code == 0, result.output
    positives = yaml.safe_load(drafts.read_text())
    assert all(d["gold"] == [missed["nearest"][0]["section"]] for d in positives)
    golden = tmp_path / "golden.yaml"
    accepted = runner.invoke(main, ["golden", "accept", positives[0]["id"], "--from", str(drafts), "--into", str(golden),
                                    "--docs", str(ROOT / "docs")])
    assert accepted.exit_code == 0, accepted.output
    records = yaml.safe_load(golden.read_text())
    assert records[0]["question"] == positives[0]["question"] and records[0]["gold"] == positives[0]["gold"]
    missing = runner.invoke(main, ["field-draft", str(saved), "--group", "999", "--out", str(drafts)])
    assert missing.exit_code == 2 and "no group 999" in missing.output


def test_field_history_lists_the_saved_runs_oldest_first(scored, tmp_path):
    report, _ = scored
    folder = tmp_path / "reports"
    folder.mkdir()
    for run, when in [("b2", "2026-12-06T01:00:00+00:00"), ("a1", "2026-12-05T01:00:00+00:00")]:
        (folder / f"field-{run}.json").write_text(json.dumps({**report, "run_id": run, "created_at": when}))
    (folder / "eval.json").write_text(json.dumps({"summary": {}, "rows": []}))  # an eval report: passed over
    (folder / "broken.json").write_text("{")
    result = CliRunner().invoke(main, ["field-history", "--reports", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    lines = json.loads(result.stdout)
    assert [line["run_id"] for line in lines] == ["a1", "b2"]
    assert lines[0]["turns"] == report["summary"]["turns"]
    assert lines[0]["top_gap"]["label"] == report["gaps"][0]["label"]
    assert "broken.json: not JSON" in result.stderr
    table = CliRunner().invoke(main, ["field-history", "--reports", str(folder)])
    assert table.exit_code == 0 and table.stdout.count("| 2026-12-0") == 2


def test_golden_draft_from_a_log_drafts_a_gap_as_field_draft_does(planted, scored, tmp_path):
    report, _ = scored
    log = write_app_log(planted, tmp_path / "app.jsonl")
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"docs": str(ROOT / "docs")}, "logs": {"app": APP_MAPPING}}))
    drafts = tmp_path / "drafts.yaml"
    result = CliRunner().invoke(main, ["golden", "draft", "--from", str(log), "--group", "1", "--config", str(config),
                                       "--out", str(drafts)])
    assert result.exit_code == 0, result.output
    written = yaml.safe_load(drafts.read_text())
    assert [d["question"] for d in written] == [q["question"] for q in report["gaps"][0]["questions"][:10]]
    alone = CliRunner().invoke(main, ["golden", "draft", "--from", str(log), "--config", str(config),
                                      "--out", str(tmp_path / "other.yaml")])
    assert alone.exit_code == 2 and "--group" in alone.output
