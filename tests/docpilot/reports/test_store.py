"""The report store: listing newest first, headers without rows, comparable runs, damaged files."""

from __future__ import annotations

import json
import os

import pytest

from docpilot.errors import ReportError
from docpilot.reports.report import load_report, score, write_report
from docpilot.reports.store import (
    ReportStore,
    differences,
    header_of,
    resolve_report,
)
from docpilot.schema import Report, Row

ROW = Row(id="q1", kind="positive", split="dev", question="q?", gold=["a#b"], retrieved=["a#b"])


def _report(run_id: str, *, split: str = "dev", golden: str = "g1", gate_only: bool = True, **fields) -> Report:
    summary, counts, gates, verdict = score([ROW], {}, gate_only=gate_only)
    return Report(run_id=run_id, created_at=f"{run_id[:4]}-01-01T00:00:00+00:00", config={},
                  fingerprints={"golden": golden, "corpus": "c", "config": "k", "model": "m", "code": "x"},
                  split=split, gate_only=gate_only, rows=[ROW], summary=summary, counts=counts,
                  gates=gates, verdict=verdict, **fields)


def _save(folder, report: Report):
    return write_report(report, folder / f"{report.run_id}.json")


def test_reports_are_listed_newest_first_by_run_id(tmp_path):
    for run_id in ("20260102T000000Z-bbbbbb", "20260101T000000Z-aaaaaa", "20260103T000000Z-cccccc"):
        _save(tmp_path, _report(run_id))
    store = ReportStore(tmp_path)
    assert [h.run_id for h in store] == ["20260103T000000Z-cccccc", "20260102T000000Z-bbbbbb",
                                         "20260101T000000Z-aaaaaa"]
    assert store.latest().run_id == "20260103T000000Z-cccccc"
    assert store.problems == []


def test_two_runs_in_one_second_are_ordered_by_write_time(tmp_path):
    later = _save(tmp_path, _report("20260101T000000Z-aaaaaa"))
    earlier = _save(tmp_path, _report("20260101T000000Z-zzzzzz"))
    os.utime(earlier, ns=(1_000_000_000, 1_000_000_000))
    os.utime(later, ns=(2_000_000_000, 2_000_000_000))
    assert ReportStore(tmp_path).latest().run_id == "20260101T000000Z-aaaaaa"


def test_a_missing_or_empty_folder_has_no_reports(tmp_path):
    assert ReportStore(tmp_path / "none").latest() is None
    assert ReportStore(tmp_path).paths() == []


def test_unreadable_and_foreign_files_are_skipped_with_a_reason(tmp_path):
    _save(tmp_path, _report("20260101T000000Z-aaaaaa"))
    (tmp_path / "20260109T000000Z-broken.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "20260108T000000Z-other.json").write_text('{"hello": 1}', encoding="utf-8")
    (tmp_path / "20260107T000000Z-half.json").write_text('{"rows": [], "run_id": "x"}', encoding="utf-8")
    (tmp_path / ".20260110T000000Z-tmp.json.123.tmp").write_text("partial", encoding="utf-8")
    store = ReportStore(tmp_path)
    assert [h.run_id for h in store] == ["20260101T000000Z-aaaaaa"]
    assert len(store.problems) == 3
    assert "cannot be read as JSON" in store.problems[0] and "broken" in store.problems[0]
    assert all("skipped" in problem for problem in store.problems)
    list(store)  # a second walk reads nothing again
    assert len(store.problems) == 3


def test_headers_are_read_without_validating_rows(tmp_path):
    path = _save(tmp_path, _report("20260101T000000Z-aaaaaa"))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["rows"][0]["kind"] = "sideways"
    path.write_text(json.dumps(data), encoding="utf-8")
    header = ReportStore(tmp_path).latest()
    assert header.run_id == "20260101T000000Z-aaaaaa"
    with pytest.raises(ReportError, match="not a DocPilot report"):
        header.load()


def test_previous_comparable_skips_runs_that_differ(tmp_path):
    _save(tmp_path, _report("20260101T000000Z-aaaaaa"))
    _save(tmp_path, _report("20260102T000000Z-bbbbbb", split="test"))
    _save(tmp_path, _report("20260103T000000Z-cccccc", golden="g2"))
    _save(tmp_path, _report("20260104T000000Z-dddddd", gate_only=False))
    _save(tmp_path, _report("20260105T000000Z-eeeeee"))
    store = ReportStore(tmp_path)
    latest = store.latest()
    previous, skipped = store.previous_comparable(latest)
    assert previous.run_id == "20260101T000000Z-aaaaaa"
    assert [s.run_id for s in skipped] == ["20260104T000000Z-dddddd", "20260103T000000Z-cccccc",
                                           "20260102T000000Z-bbbbbb"]
    assert store.previous_comparable(previous) == (None, [])


def test_differences_name_each_setting():
    a, b = _report("20260101T000000Z-aaaaaa"), _report("20260102T000000Z-bbbbbb", split="test", golden="g2",
                                                       runtime="server")
    assert differences(a, a) == []
    assert differences(a, b) == ["the golden set differs (fingerprints.golden)", "split differs (dev vs test)",
                                 "runtime differs (local vs server)"]
    assert differences(header_of(a), b) == differences(a, b)


def test_a_report_is_named_by_a_path_or_a_run_id(tmp_path):
    path = _save(tmp_path, _report("20260101T000000Z-aaaaaa"))
    store = ReportStore(tmp_path)
    assert load_report(resolve_report(str(path), store)).run_id == "20260101T000000Z-aaaaaa"
    assert load_report(resolve_report("20260101T000000Z-aaaaaa", store)).run_id == "20260101T000000Z-aaaaaa"
    assert resolve_report("20260101T000000Z-aaaaaa", store) == path
    with pytest.raises(ReportError, match="no run 'nope'"):
        resolve_report("nope", store)
    with pytest.raises(ReportError, match="no such report"):
        load_report(resolve_report(str(tmp_path / "missing.json"), store))
