"""The run where gold went stale is marked in the history, so a drop that came with the docs reads as the docs'."""

from __future__ import annotations

from docpilot.history.index import RunIndex
from docpilot.history.timeline import build_timeline
from docpilot.reports.report import rescore
from tests.support.run_series import night_report, write_night


def _night(night: int, stale: dict[int, str], *, misses: frozenset[int] = frozenset()):
    report = night_report(night, records=40, misses=misses)
    rows = [row.model_copy(update={"gold_state": stale[n]}) if n in stale else row
            for n, row in enumerate(report.rows)]
    return rescore(report.model_copy(update={"rows": rows}))


def test_the_night_gold_went_stale_is_marked_in_its_move_and_in_a_note_when_nothing_moved(tmp_path):
    gone = {0: "gone", 1: "gone", 2: "changed", 3: "gone", 5: "gone", 6: "moved"}
    write_night(tmp_path, _night(0, {}))
    write_night(tmp_path, _night(1, gone, misses=frozenset(gone)))  # the docs moved: recall drops with them
    write_night(tmp_path, _night(2, gone, misses=frozenset(gone)))  # the same stale gold: nothing new to mark
    write_night(tmp_path, _night(3, {**gone, 7: "changed"}, misses=frozenset(gone)))  # one more, no metric moves
    index = RunIndex(tmp_path)
    index.refresh()
    timeline = build_timeline(index, ["recall@8"])
    assert [step.run.stale_gold for step in timeline.steps] == [
        {}, {"gone": 4, "changed": 1, "moved": 1}, {"gone": 4, "changed": 1, "moved": 1},
        {"gone": 4, "changed": 2, "moved": 1}]
    first, second, third, fourth = timeline.steps
    assert second.moved == ["recall@8"]
    assert second.cause["lines"][-1].startswith(
        "gold went stale: 6 record(s) (changed 1, gone 4, moved 1) (up from 0 the run before) are scored against "
        "gold the docs moved, changed or removed since the golden set was locked")
    assert second.cause["stale_gold"] == [{}, {"gone": 4, "changed": 1, "moved": 1}]
    assert third.cause is None and fourth.cause is None
    notes = [note for note in timeline.notes if "gold went stale" in note]
    assert len(notes) == 1 and notes[0].startswith(f"run {fourth.run.run_id} (")  # not the third: nothing new
    assert "7 record(s) (changed 2, gone 4, moved 1) (up from 6 the run before)" in notes[0]
    assert timeline.describe()["runs"][1]["stale_gold"] == {"gone": 4, "changed": 1, "moved": 1}
