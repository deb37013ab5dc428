"""The stage cache: what is reused, what is recomputed, and that a killed run loses nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docpilot.cache import StageCache, cache_key, clear_cache, describe_cache
from docpilot.config.model import Config
from docpilot.run.job import EvalJob
from tests.conftest import DATA
from tests.support.evals import run_eval
from tests.support.interrupted_runs import eval_args, resume, stop_after
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"


def job(tmp_path, golden=PIPELINE / "golden.yaml", **changes) -> EvalJob:
    config = Config(corpus={"docs": str(PIPELINE / "docs")}, golden=str(golden),
                    cache_dir=str(tmp_path / "cache"), reports_dir=str(tmp_path / "reports"))
    return EvalJob(config=config, golden=str(golden), **changes)


def test_keys_hash_exactly_the_inputs():
    assert cache_key("model", "a", {"x": 1}) == cache_key("model", "a", {"x": 1})
    assert cache_key("model", "a", {"x": 1}) != cache_key("model", "a", {"x": 2})
    assert cache_key("model", "a").startswith("model:") and cache_key("retrieve", "a").startswith("retrieve:")


def test_results_survive_reopening(tmp_path):
    cache = StageCache(tmp_path / "c")
    cache.set("model:4:abc", {"reply": {"answer": "hi"}})
    cache.close()
    assert StageCache(tmp_path / "c").get("model:4:abc") == {"reply": {"answer": "hi"}}


def test_editing_one_record_recomputes_that_record_only(tmp_path):
    golden = tmp_path / "golden.yaml"
    records = yaml.safe_load((PIPELINE / "golden.yaml").read_text())
    golden.write_text(yaml.safe_dump(records))
    first = run_eval(job(tmp_path, golden), "inline")
    assert first.cache_stats == {"retrieve": {"reused": 0, "computed": 6}, "model": {"reused": 0, "computed": 6}}
    records[2]["question"] = "How do I roll back a release to the previous one?"
    golden.write_text(yaml.safe_dump(records))
    second = run_eval(job(tmp_path, golden), "inline")
    fresh = [r.id for r in second.rows if "model" not in r.cached]
    assert fresh == ["rollback"]
    assert second.cache_stats["model"] == {"reused": 5, "computed": 1}


def test_refresh_and_no_cache(tmp_path):
    run_eval(job(tmp_path), "inline")
    refreshed = run_eval(job(tmp_path, refresh=["model"]), "inline")
    assert all("retrieve" in r.cached and "model" not in r.cached for r in refreshed.rows)
    uncached = run_eval(job(tmp_path / "other", use_cache=False), "inline")
    assert all(r.cached == [] for r in uncached.rows)
    assert describe_cache(tmp_path / "other" / "cache")["entries"] == {"retrieve": 0, "model": 0}
    # The search index is no result of the run: it is saved beside the stage cache all the same.
    assert list((tmp_path / "other" / "cache" / "index").glob("*/manifest.json"))


def test_a_changed_metric_rescored_from_cached_rows_calls_no_model(tmp_path):
    with serve_openai(OpenAIScript()) as base_url:
        config_job = job(tmp_path)
        config_job.config.model.provider, config_job.config.model.base_url = "openai", base_url
        config_job.config.model.name = "scripted"
        run_eval(config_job, "inline")
        again = run_eval(config_job, "inline")
    assert all("model" in r.cached for r in again.rows)


def test_info_and_clear(tmp_path):
    run_eval(job(tmp_path), "inline")
    info = describe_cache(tmp_path / "cache")
    assert info["entries"] == {"retrieve": 6, "model": 6} and info["bytes"] > 0
    assert clear_cache(tmp_path / "cache", stage="model") == 6
    assert describe_cache(tmp_path / "cache")["entries"] == {"retrieve": 6, "model": 0}
    assert describe_cache(tmp_path / "absent")["entries"] == {"retrieve": 0, "model": 0}


@pytest.mark.parametrize("how", ["kill", "term"])
@pytest.mark.slow
def test_a_killed_run_loses_no_finished_model_call(tmp_path, how):
    """The CLI is killed mid-run (SIGKILL, or SIGTERM); the next run calls the model only for the rest."""
    script = OpenAIScript(default=Reply(latency_s=0.4))
    out = tmp_path / "report.json"
    with serve_openai(script) as base_url:
        args = eval_args(base_url, out, "inline")
        env = dict(os.environ, DOCPILOT_CACHE_DIR=str(tmp_path / "cache"))
        # Four requests seen: three turns answered, the fourth in flight. The third was
        # answered just now and may still be on its way to the disk; the first two were
        # answered a whole turn (0.4 s) earlier.
        code, stderr = stop_after(script, args, env, 4, signal.SIGKILL if how == "kill" else signal.SIGTERM)
        assert not out.exists()
        if how == "term":
            assert code == 130 and "run the same command again to resume" in stderr
            assert "Traceback" not in stderr
        reused, new_calls = resume(script, args, env, out)
    assert reused >= 2  # at least the calls that had finished a turn before the kill
    assert reused + new_calls == 6


def test_a_new_prompt_version_calls_the_model_again(tmp_path):
    run_eval(job(tmp_path), "inline")
    bumped = job(tmp_path)
    bumped.config.prime.prompt_version = "2"
    again = run_eval(bumped, "inline")
    assert all("retrieve" in r.cached and "model" not in r.cached for r in again.rows)


# Regression: a corrupt cache.db made every command exit 3, `cache clear` included.
def test_a_corrupt_cache_is_reported_with_the_fix_and_cache_clear_still_works(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from docpilot.cli import main
    from tests.conftest import DATA

    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "corrupt-cache"
    cache.mkdir()
    monkeypatch.setenv("DOCPILOT_CACHE_DIR", str(cache))
    (cache / "cache.db").write_bytes(b"this is not an SQLite database" * 100)
    (cache / "index").mkdir()
    (cache / "index" / "kept").write_text("the search index is not the stage cache")
    pipeline = DATA / "pipeline"
    args = ["eval", "--docs", str(pipeline / "docs"), "--golden", str(pipeline / "golden.yaml"),
            "--orchestrator", "inline", "--gate-only", "--out", str(tmp_path / "r.json")]  # fmt: skip
    broken = CliRunner().invoke(main, args)
    assert broken.exit_code == 2, broken.output
    assert "stage cache cannot be read" in broken.stderr and "docpilot cache clear" in broken.stderr
    info = CliRunner().invoke(main, ["cache", "info"])
    assert info.exit_code == 2 and "docpilot cache clear" in info.stderr
    cleared = CliRunner().invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0, cleared.output
    assert (cache / "index" / "kept").exists() and not (cache / "cache.db").exists()
    assert CliRunner().invoke(main, args).exit_code == 0


class _Payload:
    """A pickle that, once loaded, would create ``marker``: what a cache another branch wrote could hold."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _demo_eval(tmp_path, cache, out: str, *more: str) -> subprocess.CompletedProcess:
    """`docpilot eval` on the demo's first eight records, in a process of its own as a CI job runs it."""
    from tests.conftest import ROOT

    args = ["eval", "--docs", str(ROOT / "docs"), "--golden", str(ROOT / "evals" / "golden.yaml"),
            "--orchestrator", "inline", "--limit", "8", "--out", str(tmp_path / out), *more]  # fmt: skip
    return _docpilot(tmp_path, cache, *args)


def _docpilot(tmp_path, cache, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DOCPILOT_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "docpilot", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def _cache_warnings(stderr: str, cache) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:") and str(cache) in line]


# Regression: a restored cache whose rows said pickle ran the payload, then the eval exited 2.
@pytest.mark.slow
def test_a_poisoned_cache_is_read_as_misses_with_one_warning_and_runs_no_payload(tmp_path):
    import pickle
    import sqlite3

    from docpilot.schema import Report

    cache = tmp_path / "ci" / "cache"
    first = _demo_eval(tmp_path, cache, "first.json")
    assert first.returncode in (0, 1), first.stderr
    assert not _cache_warnings(first.stderr, cache)
    marker, outside = tmp_path / "marker", tmp_path / "outside"
    outside.write_text("not the cache's")
    payload = pickle.dumps(_Payload(marker))
    with sqlite3.connect(cache / "cache.db") as db:
        rows = [rowid for (rowid,) in db.execute("SELECT rowid FROM Cache ORDER BY rowid")]
        assert len(rows) == 16  # 8 rankings, 8 turns
        db.execute("UPDATE Cache SET mode = 4, value = ?, filename = NULL", (payload,))
        # A value file named outside the folder, bytes that are not JSON, JSON of another shape.
        db.execute("UPDATE Cache SET mode = 2, value = NULL, filename = '../../outside' WHERE rowid = ?", (rows[0],))
        db.execute("UPDATE Cache SET mode = 1, value = ? WHERE rowid = ?", (b"\x80\x04 not json", rows[1]))
        db.execute("UPDATE Cache SET mode = 1, value = ? WHERE key LIKE 'model:%' AND rowid > ?",
                   (b'{"reply": {"answer": 5}, "languages": []}', rows[-3]))
        # A key stored pickled: only listing the keys would read it.
        db.execute("INSERT INTO Cache (key, raw, store_time, access_time, mode, value) VALUES (?, 0, 0, 0, 1, ?)",
                   (payload, b"{}"))
    db.close()

    second = _demo_eval(tmp_path, cache, "second.json")
    assert second.returncode in (0, 1), second.stderr
    assert len(_cache_warnings(second.stderr, cache)) == 1, second.stderr
    assert "never writes" in second.stderr and "docpilot cache clear" in second.stderr
    assert "Traceback" not in second.stderr
    report = Report.model_validate_json((tmp_path / "second.json").read_text())
    assert all(row.cached == [] for row in report.rows)  # every stage ran again
    assert not marker.exists() and outside.read_text() == "not the cache's"

    info = _docpilot(tmp_path, cache, "cache", "info", "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["foreign"] == 1 and not marker.exists()
    third = _demo_eval(tmp_path, cache, "third.json")
    assert not _cache_warnings(third.stderr, cache)  # the entries were stored again, as data
    assert all(len(row.cached) == 2 for row in Report.model_validate_json((tmp_path / "third.json").read_text()).rows)
    assert _docpilot(tmp_path, cache, "cache", "clear").returncode == 0
    assert not marker.exists() and outside.exists()


@pytest.fixture(scope="module")
def gate_only_cache(tmp_path_factory) -> Path:
    """The cache folder one gate-only run of the demo's first eight records filled, made once for the module
    and never changed: a test copies it."""
    folder = tmp_path_factory.mktemp("gate-only-cache")
    cache = folder / "cache"
    first = _demo_eval(folder, cache, "first.json", "--gate-only")
    assert first.returncode in (0, 1), first.stderr
    return cache


@pytest.mark.parametrize("foreign", ["trigger", "setting"])
@pytest.mark.slow
def test_a_cache_database_of_another_make_is_not_opened_and_the_run_goes_on(tmp_path, foreign, gate_only_cache):
    """diskcache runs its settings as PRAGMA statements and trusts its triggers: a foreign database is never opened."""
    import sqlite3

    cache = tmp_path / "cache"
    shutil.copytree(gate_only_cache, cache)  # the cache a gate-only run of the demo left
    with sqlite3.connect(cache / "cache.db") as db:
        if foreign == "trigger":
            db.execute("CREATE TRIGGER forged AFTER INSERT ON Cache BEGIN DELETE FROM Cache; END")
        else:
            db.execute("INSERT INTO Settings VALUES ('sqlite_foreign_keys', 'ON; ATTACH ''x'' AS y')")
    db.close()
    second = _demo_eval(tmp_path, cache, "second.json", "--gate-only")
    assert second.returncode in (0, 1), second.stderr
    warnings = _cache_warnings(second.stderr, cache)
    assert len(warnings) == 1 and "not opened" in warnings[0] and "goes on without it" in warnings[0]
    info = _docpilot(tmp_path, cache, "cache", "info")
    assert info.returncode == 2 and "docpilot cache clear" in info.stderr
    assert _docpilot(tmp_path, cache, "cache", "clear").returncode == 0
    assert _demo_eval(tmp_path, cache, "third.json", "--gate-only").returncode in (0, 1)
    assert describe_cache(cache)["entries"] == {"retrieve": 8, "model": 0}


def test_keys_and_values_are_stored_raw_never_pickled(tmp_path):
    from docpilot.cache import DataDisk

    disk = DataDisk(str(tmp_path))
    assert disk.put("model:4:abc") == ("model:4:abc", True)
    with pytest.raises(TypeError):
        disk.put(("model", 4))
    with pytest.raises(TypeError):
        disk.store({"a": 1}, False)
