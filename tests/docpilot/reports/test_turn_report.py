"""A report of golden conversations: its turn slices written, read back, re-scored and shown; a run of single
questions written as it was before conversations."""

from __future__ import annotations

import io
import json

import pytest
from docpilot.metrics.slices import slice_by_turn
from docpilot.metrics.summary import summarize
from rich.console import Console

from docpilot.config.variants import Variant
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.reports.scorecard import TURNS_TITLE, render_scorecard
from docpilot.reports.variants import join_variants, one_variant, rescore_variants
from docpilot.schema import Report
from tests.support.turn_reports import SMALL, conversation_report


def render(report: Report) -> str:
    out = io.StringIO()
    render_scorecard(report, Console(file=out, width=160), path="r.json")
    return out.getvalue()


def test_a_report_of_conversations_keeps_its_turn_slices_on_disk(tmp_path) -> None:
    report = conversation_report()
    path = write_report(report, tmp_path / "run.json")
    written = json.loads(path.read_text())
    assert list(written["turns"]) == ["first", "follow-up", "turn 1", "turn 2", "turn 3"]
    assert written["turns"]["first"]["records"] == 2 and written["turns"]["follow-up"]["records"] == 3
    by_id = {row["id"]: row for row in written["rows"]}
    assert (by_id["deploy/2"]["conversation"], by_id["deploy/2"]["turn"]) == ("deploy", 2)
    assert by_id["pos-error"]["conversation"] is None  # a single question among turns says it is none
    back = load_report(path)
    assert back.turns == report.turns == slice_by_turn(back.rows)
    assert rescore(back).turns == back.turns
    follow_ups = [row for row in back.rows if row.turn is not None and row.turn > 1]
    assert (back.turns["follow-up"].summary, back.turns["follow-up"].counts) == summarize(follow_ups)
    # the summary reads each turn as a record: positives among the turns and the single questions alike
    assert back.counts["recall@8"] == sum(row.kind == "positive" and bool(row.gold) for row in back.rows)


def test_a_report_of_single_questions_is_written_as_it_was_before_conversations(tmp_path) -> None:
    report = rescore(load_report(SMALL))
    assert report.turns == {}
    first = write_report(report, tmp_path / "a.json")
    text = first.read_text()
    assert '"turns"' not in text and '"conversation"' not in text and '"retrieval_query"' not in text
    assert not any("turn" in row for row in json.loads(text)["rows"])
    # read back and written again, byte for byte
    assert write_report(load_report(first), tmp_path / "b.json").read_bytes() == first.read_bytes()


def test_a_report_written_before_conversations_reads_with_no_turn_slices() -> None:
    older = json.loads(SMALL.read_text())
    assert "turns" not in older and all("turn" not in row for row in older["rows"])
    report = load_report(SMALL)
    assert report.turns == {} and all(row.turn is None for row in report.rows)
    assert rescore(report).turns == {}


def test_the_scorecard_shows_a_turn_table_only_for_a_run_of_conversations() -> None:
    with_turns = render(conversation_report())
    table = with_turns.split(TURNS_TITLE)[1]
    lines = [line for line in table.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in lines] == ["first", "follow-up", "turn 1", "turn 2", "turn 3"]
    report = conversation_report()
    first = next(line for line in lines if line.split("│")[1].strip() == "first")
    assert first.split("│")[2].strip() == str(report.turns["first"].records)
    assert first.split("│")[3].strip() == f"{report.turns['first'].summary['recall@8']:.3f}"
    assert "all split, 8 records, 5 of them turns of 2 conversations" in with_turns  # the title counts them
    single = render(rescore(load_report(SMALL)))
    assert TURNS_TITLE not in single and single.splitlines()[0].rstrip().endswith("all split, 8 records")


@pytest.fixture
def variants_report(tmp_path) -> Report:
    """Two variants of the conversation report, joined as a run of several writes them, read back from disk."""
    base = conversation_report()
    other = rescore(base.model_copy(update={"rows": [
        row.model_copy(update={"retrieved": row.gold[:1] + row.retrieved}) if row.kind == "positive" else row
        for row in base.rows]}))
    joined = join_variants([(Variant(name="base"), base), (Variant(name="gold-first"), other)])
    return load_report(write_report(joined, tmp_path / "variants.json"))


def test_each_variant_keeps_its_own_turn_slices(variants_report) -> None:
    base, other = variants_report.variants
    assert base.turns == variants_report.turns and base.turns["follow-up"].summary["recall@8"] < 1
    assert other.turns["follow-up"].summary["recall@8"] == 1.0
    assert rescore_variants(variants_report).variants[1].turns == other.turns
    assert one_variant(variants_report, "gold-first").turns == other.turns


def test_a_run_of_variants_of_single_questions_writes_no_turn_slices(tmp_path) -> None:
    base = rescore(load_report(SMALL))
    joined = join_variants([(Variant(name="a"), base), (Variant(name="b"), base)])
    text = write_report(joined, tmp_path / "v.json").read_text()
    assert '"turns"' not in text and '"conversation"' not in text
    assert '"variant": "b"' in text  # the variants' own fields are written
