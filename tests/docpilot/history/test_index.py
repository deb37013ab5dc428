"""The run index: built from the reports, kept up to date cheaply, rebuilt when lost, shared by two writers."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from docpilot.history.index import INDEX_FILE, RunIndex
from tests.conftest import ROOT
from tests.support.run_series import night_report, write_night, write_series


def test_the_index_holds_each_run_with_its_series_fingerprints_and_summary(tmp_path):
    paths = write_series(tmp_path, 3, records=20)
    index = RunIndex(tmp_path)
    assert index.refresh() == []
    runs = index.runs()
    assert [run.file for run in runs] == [p.name for p in paths]
    first = runs[0]
    assert first.run_id == paths[0].stem and first.created_at == "2026-10-01T02:00:00+00:00"
    assert first.golden == "g" * 64 and first.corpus.startswith("ccc") and first.code_digest == "d" * 64
    assert first.config_digest and first.variant is None and first.verdict == "pass"
    assert first.model == "extractive/extractive-v1" and first.records == 20 and first.version
    assert first.summary["recall@8"] is not None and first.counts["recall@8"] == 16
    assert first.config["prime"]["top_k"] == 5 and len(first.page_fingerprints) == 20
    assert len({run.series for run in runs}) == 1
    db = sqlite3.connect(tmp_path / INDEX_FILE)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_truncated_and_a_hand_edited_report_are_skipped_with_one_warning_each(tmp_path):
    good, cut, edited, timed = write_series(tmp_path, 4, records=10)
    cut.write_text(cut.read_text()[:500])
    edited.write_text(edited.read_text().replace('"verdict": "pass"', '"verdict": "great"'))
    timed.write_text(timed.read_text().replace('"latency_ms": ', '"latency_ms": -', 1))
    index = RunIndex(tmp_path)
    problems = index.refresh()
    assert len(problems) == 3
    assert any(cut.name in p and "not valid JSON" in p for p in problems), problems
    assert any(edited.name in p and "verdict" in p for p in problems), problems
    assert any(timed.name in p and "not consistent" in p and "latency_ms" in p for p in problems), problems
    assert [run.file for run in index.runs()] == [good.name]
    # The next reader is told again, once, without the files being read twice.
    assert RunIndex(tmp_path).refresh() == problems


def test_a_deleted_index_is_rebuilt_from_the_reports(tmp_path):
    write_series(tmp_path, 4, records=10)
    RunIndex(tmp_path).refresh()
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"{INDEX_FILE}{suffix}").unlink(missing_ok=True)
    index = RunIndex(tmp_path)
    index.refresh()
    assert len(index.runs()) == 4 and (tmp_path / INDEX_FILE).is_file()


def test_a_damaged_index_is_replaced_with_a_note(tmp_path):
    write_series(tmp_path, 2, records=10)
    (tmp_path / INDEX_FILE).write_bytes(b"this is not a database" * 100)
    index = RunIndex(tmp_path)
    assert index.refresh() == []
    assert len(index.runs()) == 2
    assert any("damaged" in note for note in index.notes)


def test_a_changed_or_removed_report_is_noticed_by_size_and_time(tmp_path):
    first, second = write_series(tmp_path, 2, records=10)
    index = RunIndex(tmp_path)
    index.refresh()
    changed = night_report(1, records=10, misses=frozenset(range(10)))
    changed = changed.model_copy(update={"run_id": second.stem})
    write_night(tmp_path, changed)
    os.utime(second, ns=(second.stat().st_atime_ns, second.stat().st_mtime_ns + 10**9))
    index.refresh()
    assert index.runs()[1].summary["recall@8"] == 0.0
    first.unlink()
    index.refresh()
    assert [run.file for run in index.runs()] == [second.name]


def test_a_folder_that_cannot_be_written_keeps_the_index_in_memory(tmp_path):
    write_series(tmp_path, 2, records=10)
    tmp_path.chmod(0o555)
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as root: a folder's mode does not stop writes")
        index = RunIndex(tmp_path)
        assert index.refresh() == []
        assert len(index.runs()) == 2 and not (tmp_path / INDEX_FILE).exists()
        assert any("kept in memory" in note for note in index.notes)
    finally:
        tmp_path.chmod(0o755)


def test_an_index_that_cannot_be_opened_is_kept_in_memory_and_the_reports_untouched(tmp_path):
    paths = write_series(tmp_path, 2, records=10)
    (tmp_path / INDEX_FILE).mkdir()  # something that is no database file sits where the index goes
    before = {p: p.read_bytes() for p in paths}
    index = RunIndex(tmp_path)
    assert index.refresh() == []
    assert len(index.runs()) == 2 and (tmp_path / INDEX_FILE).is_dir()
    assert any("kept in memory" in note for note in index.notes)
    assert {p: p.read_bytes() for p in paths} == before


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from docpilot.history.index import RunIndex
    from tests.support.run_series import night_report, write_night

    folder, first = Path(sys.argv[1]), int(sys.argv[2])
    sys.stdin.readline()  # both writers start together
    for night in range(first, first + 15):
        path = write_night(folder, night_report(night, records=10))
        RunIndex(folder).record(path, night_report(night, records=10))
        RunIndex(folder).refresh()
    print("done")
""")


@pytest.mark.slow
def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(first)], cwd=ROOT, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for first in (0, 100)]
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0 and out.strip() == "done", err
    index = RunIndex(tmp_path)
    assert index.refresh() == []
    assert len(index.runs()) == 30


class _Payload:
    """A pickle that, once loaded, would create ``marker``: what a hostile index row could hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


# Regression: a row of another kind (a restored .runs.sqlite) crashed every reader of the
# index with a JSONDecodeError, a TypeError or an AttributeError when its run was shown.
def test_poisoned_rows_of_the_run_index_are_dropped_with_a_note_and_indexed_again(tmp_path):
    import pickle

    from click.testing import CliRunner

    from docpilot.cli import main

    paths = write_series(tmp_path, 4, records=10)
    index = RunIndex(tmp_path)
    index.refresh()
    expected = [(run.file, run.summary, run.records) for run in index.runs()]
    marker = tmp_path / "marker"
    payload = pickle.dumps(_Payload(marker))
    with sqlite3.connect(tmp_path / INDEX_FILE) as db:
        db.execute("UPDATE runs SET summary = 'not json' WHERE file = ?", (paths[0].name,))
        db.execute("UPDATE runs SET config = ?, records = 'many' WHERE file = ?", (payload, paths[1].name))
        db.execute("UPDATE runs SET headline = '[1, 2]', shown = '[]' WHERE file = ?", (paths[2].name,))
        db.execute("INSERT OR REPLACE INTO pairs (file, other, payload) VALUES (?, ?, ?)",
                   (paths[3].name, paths[2].name, '{"moves": {"recall@8": 3}, "cause": {}}'))
    db.close()
    again = RunIndex(tmp_path)
    assert again.refresh() == []
    assert [(run.file, run.summary, run.records) for run in again.runs()] == expected
    assert len(again.notes) == 1 and "3 run(s) and 1 comparison(s)" in again.notes[0]
    assert RunIndex(tmp_path).refresh() == [] and not marker.exists()
    with sqlite3.connect(tmp_path / INDEX_FILE) as db:
        db.execute("UPDATE runs SET summary = '{\"recall@8\": \"high\"}' WHERE file = ?", (paths[3].name,))
    db.close()
    shown = CliRunner().invoke(main, ["history", "recall@8", "--reports", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert shown.stderr.count("warning:") == 1 and INDEX_FILE in shown.stderr
    assert "Traceback" not in shown.output and not marker.exists()
