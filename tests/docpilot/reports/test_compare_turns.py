"""Paired comparisons of runs holding conversations: rows pair by id, a turn's id names its conversation and
place, so two runs' turns pair turn by turn, and every paired test reads a turn as it reads a single question."""

from __future__ import annotations

from docpilot.config.variants import Variant
from docpilot.reports.compare import compare_reports
from docpilot.reports.report import load_report, rescore, write_report
from docpilot.reports.variants import join_variants
from docpilot.schema import Report, Row
from tests.support.turn_reports import conversation_report


def _found_gold(row: Row) -> Row:
    """The row with its first gold entry ranked first, as a retriever that read the conversation might rank it."""
    if row.kind != "positive" or row.turn is None or row.turn == 1:
        return row
    return row.model_copy(update={"retrieved": [row.gold[0], *row.retrieved]})


def _runs(tmp_path) -> tuple[Report, Report]:
    before = conversation_report()
    after = rescore(before.model_copy(update={"rows": [_found_gold(r) for r in before.rows],
                                              "fingerprints": {**before.fingerprints, "config": "changed"}}))
    return (load_report(write_report(before, tmp_path / "a.json")),
            load_report(write_report(after, tmp_path / "b.json")))


def _as_records(report: Report) -> Report:
    """The same rows, read as single questions."""
    return report.model_copy(update={"rows": [r.model_copy(update={"conversation": None, "turn": None,
                                                                    "retrieval_query": None})
                                              for r in report.rows]})


def test_two_runs_of_conversations_pair_turn_by_turn(tmp_path) -> None:
    a, b = _runs(tmp_path)
    comparison = compare_reports(a, b)
    assert comparison.records == len(a.rows) and comparison.only_a == comparison.only_b == []
    recall = next(t for t in comparison.tests if t.outcome == "recall@8")
    assert [(f.id, f.a, f.b) for f in recall.better] == [("deploy/2", 0.0, 1.0)]  # the follow-up that moved
    assert recall.worse == [] and recall.n == sum(r.kind == "positive" for r in a.rows)
    # turn 1 of the same conversation did not move: it is a pair of its own
    assert "deploy/1" not in {f.id for t in comparison.tests for f in (*t.better, *t.worse)}


def test_the_paired_tests_read_turns_as_they_read_records(tmp_path) -> None:
    a, b = _runs(tmp_path)
    turns = compare_reports(a, b)
    records = compare_reports(_as_records(a), _as_records(b))
    assert turns.tests == records.tests and turns.records == records.records


def test_a_turn_only_one_run_asked_is_left_out_and_the_others_still_pair(tmp_path) -> None:
    a, b = _runs(tmp_path)
    extra = next(r for r in b.rows if r.id == "deploy/3").model_copy(update={"id": "deploy/4", "turn": 4})
    b = rescore(b.model_copy(update={"rows": [*b.rows, extra]}))
    comparison = compare_reports(a, b)
    assert comparison.only_b == ["deploy/4"] and comparison.records == len(a.rows)
    assert any("different records" in w for w in comparison.warnings)
    recall = next(t for t in comparison.tests if t.outcome == "recall@8")
    assert [f.id for f in recall.better] == ["deploy/2"]


def test_variants_pair_their_turns_as_their_records(tmp_path) -> None:
    a, b = _runs(tmp_path)
    joined = load_report(write_report(join_variants([(Variant(name="alone"), a), (Variant(name="read"), b)]),
                                      tmp_path / "variants.json"))
    flat = join_variants([(Variant(name="alone"), _as_records(a)), (Variant(name="read"), _as_records(b))])
    assert joined.paired.tests == flat.paired.tests
    recall = next(t for t in joined.paired.tests if t.outcome == "recall@8")
    assert (recall.better, recall.worse, recall.n) == (1, 0, sum(r.kind == "positive" for r in a.rows))
