"""`docpilot golden lock` and the lock in `golden check`, `--fix`, eval, improve and history, on copies of the demo.

The week of docs edits of ``tests.support.moved_docs`` (a heading renamed, a section
rewritten, one removed, a page split) is what a golden set meets in the wild: each
record under it must be named with its state, the moved ones rewritten and nothing
else, and a run must tell the others from a retrieval regression.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from docpilot.cli import main
from docpilot.reports.report import load_report
from tests.conftest import ROOT, SHARED_DATA
from tests.support.moved_docs import EXPECTED, copy_demo, move_the_docs

PREFECT = SHARED_DATA / "prefect-docs" / "docs"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return copy_demo(tmp_path)


def _gate_only(out: str):
    result = run("eval", "--docs", "docs", "--gate-only", "--orchestrator", "inline", *(("--out", out) if out else ()))
    assert result.exit_code in (0, 1), result.output
    return result


def _recall(report, ids) -> dict[str, float]:
    from docpilot.metrics.retrieval import recall_at_k

    return {row.id: recall_at_k(row.retrieved, row.gold, 8) for row in report.rows if row.id in ids}


@pytest.mark.slow  # takes seconds
def test_a_lock_of_unchanged_docs_finds_nothing_and_a_set_without_one_checks_as_before(project):
    plain = run("golden", "check", "--docs", "docs", "--json")
    assert plain.exit_code == 0 and json.loads(plain.stdout)["lock"] is None
    locked = run("golden", "lock", "--docs", "docs")
    assert locked.exit_code == 0, locked.output
    assert locked.output.startswith("wrote evals/golden.lock: 109 records locked (153 gold entries) against docs")
    check = run("golden", "check", "--docs", "docs", "--json")
    assert check.exit_code == 0, check.output
    assert json.loads(check.stdout)["lock"] == {"path": "evals/golden.lock", "fixed": {}, "records": []}


@pytest.mark.slow  # five gate-only evals, an improve and a history of the demo: seconds
def test_a_week_of_docs_edits_is_named_fixed_where_it_moved_and_marked_in_the_runs(project):
    golden, lock = project / "evals" / "golden.yaml", project / "evals" / "golden.lock"
    assert run("golden", "lock", "--docs", "docs").exit_code == 0
    _gate_only("")  # the run on the docs as locked, into the reports folder
    before = load_report(next((project / "reports").glob("*.json")))
    move_the_docs(project / "docs")

    check = run("golden", "check", "--docs", "docs", "--json")
    assert check.exit_code == 1, check.output  # valid, but gold moved under it
    found = {r["id"]: r for r in json.loads(check.stdout)["lock"]["records"]}
    assert {i: r["state"] for i, r in found.items()} == {i: state for i, (state, _) in EXPECTED.items()}
    for record_id, (_, moves) in EXPECTED.items():
        assert {e["entry"]: e["moved_to"] for e in found[record_id]["entries"] if e["moved_to"]} == moves
    assert found["models-openai-retries"]["identifiers_lost"] == ["429"]
    text = run("golden", "check", "--docs", "docs")
    assert "moved     ret-mrr: metrics/retrieval#mrr → metrics/retrieval#mean-reciprocal-rank (Retrieval metrics " \
           "› MRR is now Retrieval metrics › Mean reciprocal rank)" in text.stdout
    assert "3 gold entries name nothing in docs, stale by the lock (below)" in text.stdout.replace("\n", " ")

    # An eval before the fix runs and marks every stale record; the scorecard counts them beside retrieval.
    unfixed = _gate_only("")
    assert "stale gold: 4 record(s) (moved 2, changed 1, gone 1)" in " ".join(unfixed.output.split())

    set_before, lock_before = golden.read_bytes(), json.loads(lock.read_text())
    fixed = run("golden", "check", "--docs", "docs", "--fix", "--json")
    assert fixed.exit_code == 1, fixed.output  # the changed and gone records wait for a person
    assert json.loads(fixed.stdout)["lock"]["fixed"] == {i: m for i, (_, m) in EXPECTED.items() if m}
    changed_lines = [line for line in difflib.ndiff(set_before.decode().splitlines(keepends=True),
                                                    golden.read_text().splitlines(keepends=True))
                     if line[0] in "+-"]
    assert changed_lines == [
        '-   gold: ["metrics#small-sets", "getting-started#scorecard"]\n',
        '+   gold: ["metrics#small-sets", "reading-the-scorecard#scorecard"]\n',
        '-   gold: ["metrics/retrieval#mrr"]\n',
        '+   gold: ["metrics/retrieval#mean-reciprocal-rank"]\n',
    ]
    assert len(golden.read_bytes()) - len(set_before) == len("reading-the-scorecard") - len("getting-started") \
        + len("mean-reciprocal-rank") - len("mrr")  # nothing else, byte for byte
    lock_after = json.loads(lock.read_text())
    assert {k: v for k, v in lock_after["records"].items() if k not in ("ret-mrr", "metrics-flaky")} == \
        {k: v for k, v in lock_before["records"].items() if k not in ("ret-mrr", "metrics-flaky")}
    moved = lock_after["records"]["ret-mrr"]["gold"]["metrics/retrieval#mean-reciprocal-rank"]
    assert moved["digest"] == lock_before["records"]["ret-mrr"]["gold"]["metrics/retrieval#mrr"]["digest"]
    assert moved["heading_path"] == ["Retrieval metrics", "Mean reciprocal rank"]
    again = run("golden", "check", "--docs", "docs", "--fix")
    assert again.exit_code == 1 and "fixed 0 moved gold entries" in again.stderr
    assert {r["id"] for r in json.loads(run("golden", "check", "--docs", "docs", "--json").stdout)["lock"][
        "records"]} == {"cache-page-edit", "models-openai-retries", "start-make-eval"}

    # The fixed set scores the moved records as the unchanged docs did; the others are marked in their rows.
    _gate_only("fixed.json")
    after = load_report(project / "fixed.json")
    moved_ids = {i for i, (_, m) in EXPECTED.items() if m}
    assert _recall(after, moved_ids) == _recall(before, moved_ids)
    assert {row.id: row.gold_state for row in after.rows if row.gold_state} == {
        "cache-page-edit": "changed", "models-openai-retries": "gone"}
    assert all(row.gold_state is None for row in before.rows)

    improved = run("improve", "fixed.json", "--docs", "docs", "--json", "--no-settings")
    causes = {f["id"]: f["cause"] for f in json.loads(improved.stdout)["failures"]}
    assert causes["cache-page-edit"] == causes["models-openai-retries"] == "stale-gold"  # before any retrieval cause

    history = run("history", "recall@8", "--json")
    assert history.exit_code == 0, history.output
    runs = json.loads(history.stdout)["runs"]
    assert [r["stale_gold"] for r in runs] == [{}, {"moved": 2, "changed": 1, "gone": 1}]
    marked = [line for move in json.loads(history.stdout)["moves"] for line in move["cause"]["lines"]]
    marked += json.loads(history.stdout)["notes"]
    assert any("gold went stale: 4 record(s) (changed 1, gone 1, moved 2)" in line for line in marked)


def test_bad_input_stops_with_the_file_the_line_and_the_fix_and_writes_nothing(project):
    golden, lock = project / "evals" / "golden.yaml", project / "evals" / "golden.lock"
    fix = run("golden", "check", "--docs", "docs", "--fix")
    assert fix.exit_code == 2 and "golden.yaml: has no lock beside it" in fix.stderr and "golden lock" in fix.stderr
    unknown = run("golden", "lock", "no-such-record", "--docs", "docs")
    assert unknown.exit_code == 2 and "no record with id 'no-such-record'" in unknown.stderr
    assert not lock.exists()

    text = golden.read_text()
    golden.write_text(text.replace('gold: ["models#retries"]', 'gold: ["models#retry"]'))
    refused = run("golden", "lock", "--docs", "docs")
    assert refused.exit_code == 2 and "record 'models-openai-retries': gold entry 'models#retry'" in refused.stderr
    assert "did you mean: models#retries" in refused.stderr and not lock.exists()

    golden.write_text(text)
    assert run("golden", "lock", "--docs", "docs").exit_code == 0
    lock.write_text(lock.read_text().replace('"version": 1,', '"version": 1,\n<<<<<<< HEAD', 1))
    for args in (("golden", "check", "--docs", "docs"), ("golden", "check", "--docs", "docs", "--fix")):
        broken = run(*args)
        assert broken.exit_code == 2, broken.output
        assert "evals/golden.lock:3: is not a golden lock" in broken.stderr and "Traceback" not in broken.output
        assert "run `docpilot golden lock` to write it again" in broken.stderr
    assert golden.read_text() == text
    stopped = run("eval", "--docs", "docs", "--gate-only", "--orchestrator", "inline", "--out", "report.json")
    assert stopped.exit_code == 2 and "evals/golden.lock:3: is not a golden lock" in stopped.stderr
    assert "retrieve:" not in stopped.output and not (project / "report.json").exists()  # stopped before ranking


def test_locking_one_record_again_keeps_every_other_lock(project):
    assert run("golden", "lock", "--docs", "docs").exit_code == 0
    move_the_docs(project / "docs")
    before = json.loads((project / "evals" / "golden.lock").read_text())
    relocked = run("golden", "lock", "cache-page-edit", "--docs", "docs")
    assert relocked.exit_code == 0, relocked.output
    assert "1 records locked (1 gold entries)" in relocked.output and "108 kept their earlier lock" in relocked.output
    assert "locked again over gold that had moved, changed or gone: cache-page-edit" in relocked.output
    after = json.loads((project / "evals" / "golden.lock").read_text())
    assert {k for k in after["records"] if after["records"][k] != before["records"][k]} == {"cache-page-edit"}
    states = {r["id"] for r in json.loads(run("golden", "check", "--docs", "docs", "--json").stdout)["lock"]["records"]}
    assert states == set(EXPECTED) - {"cache-page-edit"}


@pytest.mark.slow  # two fresh interpreters, each running a gate-only eval of the demo
def test_a_run_without_a_lock_loads_nothing_of_it_and_one_with_a_lock_reads_it(project):
    code = ("import sys; from click.testing import CliRunner; from docpilot.cli import main; "
            "result = CliRunner().invoke(main, ['eval', '--docs', 'docs', '--gate-only', '--orchestrator', 'inline', "
            "'--out', 'report.json']); assert result.exit_code in (0, 1), result.output; "
            "print(' '.join(m for m in ('docpilot.golden.lock', 'docpilot.golden.staleness') if m in sys.modules))")

    def loaded() -> str:
        done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    assert loaded() == ""  # the set has no lock: one stat per shard, no module of the lock loaded
    assert run("golden", "lock", "--docs", "docs").exit_code == 0
    assert loaded() == "docpilot.golden.lock docpilot.golden.staleness"


@pytest.mark.slow  # the Prefect docs are 955 pages: a few seconds to read
@pytest.mark.skipif(not PREFECT.is_dir(), reason="the Prefect docs beside the project are absent")
def test_a_lock_of_the_prefect_set_is_written_within_five_seconds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prefect-golden.yaml").write_bytes((ROOT / "benchmarks" / "data" / "prefect-golden.yaml").read_bytes())
    started = time.perf_counter()
    result = run("golden", "lock", "--docs", str(PREFECT), "--golden", "prefect-golden.yaml")
    took = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert "96 records locked" in result.output
    assert took < 5, f"{took:.1f} s to lock the Prefect set (the target is 5 s)"
    check = run("golden", "check", "--docs", str(PREFECT), "--golden", "prefect-golden.yaml", "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["lock"]["records"] == []
