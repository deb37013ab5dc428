"""Writes that fail end in one clear message: what was being written, where, that the disk is full.

Each failing run is a child process under ``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so that a
write past the limit fails with ``EFBIG`` (or comes back short), as on a full disk. The child
must exit 2 with no traceback from any thread, leave the reports written before it as they
were, and call a healthy cache healthy.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from docpilot.cache import CacheUnavailable, CacheUnreadable, _database_failure, describe_cache
from docpilot.cli import main
from tests.conftest import DATA, ROOT

pytestmark = pytest.mark.slow

PIPELINE = DATA / "pipeline"
PIPELINE_ARGS = ["--docs", str(PIPELINE / "docs"), "--golden", str(PIPELINE / "golden.yaml")]
FULL = "the disk is full or the file too large"


def _eval(tmp_path: Path, cache: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DOCPILOT_CACHE_DIR=str(cache), DOCPILOT_REPORTS_DIR=str(tmp_path / "reports"),
               PREFECT_HOME=str(tmp_path / "prefect-home"))
    return subprocess.run(
        [sys.executable, "-m", "docpilot", "eval", "--orchestrator", "inline", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        preexec_fn=limited if limit is not None else None,
    )


def _reports(tmp_path: Path) -> dict[str, bytes]:
    folder = tmp_path / "reports"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def _one_clear_message(result: subprocess.CompletedProcess, what: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "Exception in thread" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith(("error:", "internal error:"))]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: ") and f"cannot write the {what}" in errors[0] and FULL in errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def _first_run(tmp_path_factory) -> Path:
    """One successful run: its report in ``reports/``, its warm cache in ``earlier-cache/``."""
    home = tmp_path_factory.mktemp("first-run")
    first = _eval(home, home / "earlier-cache", *PIPELINE_ARGS)
    assert first.returncode == 0, first.stderr
    return home


@pytest.fixture
def earlier(tmp_path: Path, _first_run: Path) -> dict[str, bytes]:
    """A report written by an earlier, successful run into this test's reports folder, and its warm cache."""
    for name in ("reports", "earlier-cache"):
        shutil.copytree(_first_run / name, tmp_path / name)
    reports = _reports(tmp_path)
    assert len(reports) == 1
    return reports


@pytest.mark.parametrize(
    ("args", "limit"),
    [
        # The pipeline's index files are a few hundred bytes: the first write fails with EFBIG.
        pytest.param(PIPELINE_ARGS, 300, id="efbig"),
        # The demo corpus's arrays are larger than the limit: numpy's write comes back short, with no errno.
        pytest.param([], 16_384, id="short-write"),
    ],
)
# Regression: a fresh cache on a full disk ended in "internal error: OSError: 29808 requested and 16352 written".
def test_a_fresh_cache_whose_index_cannot_be_saved(tmp_path, earlier, args, limit) -> None:
    cache = tmp_path / "cache"
    result = _eval(tmp_path, cache, *args, limit=limit)
    message = _one_clear_message(result, "search index")
    assert "cache clear" not in message and str(cache / "index") in message
    assert _reports(tmp_path) == earlier
    index = cache / "index"
    assert not index.exists() or not any(p.name.startswith(".building-") for p in index.iterdir())


# Regression: a write to a warm cache on a full disk was reported as a corrupt cache, with advice to clear it.
def test_a_warm_cache_that_cannot_be_written_is_called_healthy_and_kept(tmp_path, earlier) -> None:
    cache = tmp_path / "earlier-cache"  # warm: the earlier run filled it
    entries = describe_cache(cache)["entries"]
    assert entries["model"] > 0
    result = _eval(tmp_path, cache, *PIPELINE_ARGS, limit=4096)
    message = _one_clear_message(result, "stage cache")
    assert "cache clear" not in message and "not damaged" in message
    assert _reports(tmp_path) == earlier
    with sqlite3.connect(cache / "cache.db") as db:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
    assert describe_cache(cache)["entries"] == entries  # every entry is still there


# Regression: with --no-cache, the language model's background load printed a thread's traceback.
def test_no_cache_and_a_language_model_that_cannot_be_unpacked(tmp_path, earlier) -> None:
    result = _eval(tmp_path, tmp_path / "earlier-cache", *PIPELINE_ARGS, "--no-cache", limit=100_000)
    message = _one_clear_message(result, "temporary copy of the language model")
    assert "TMPDIR" in message
    assert _reports(tmp_path) == earlier


def test_a_genuinely_corrupt_cache_still_gets_the_advice_to_clear_it(tmp_path, earlier) -> None:
    cache = tmp_path / "earlier-cache"
    with sqlite3.connect(cache / "cache.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray((cache / "cache.db").read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)  # every page after the first overwritten; the header kept
    (cache / "cache.db").write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["eval", "--orchestrator", "inline", *PIPELINE_ARGS],
                                env={"DOCPILOT_CACHE_DIR": str(cache), "DOCPILOT_REPORTS_DIR": str(tmp_path / "reports")})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "stage cache cannot be read" in result.stderr and "docpilot cache clear" in result.stderr
    assert _reports(tmp_path) == earlier


def _error(name: str, message: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorname = name  # what SQLite itself sets on the errors it raises
    return exc


def test_an_error_that_is_not_damage_is_checked_against_the_file(tmp_path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with sqlite3.connect(cache / "cache.db") as db:
        db.execute("CREATE TABLE t (x)")
    locked = _database_failure(cache, _error("SQLITE_BUSY", "database is locked"))
    assert isinstance(locked, CacheUnavailable) and "another process" in str(locked)
    assert "cache clear" not in str(locked)
    (cache / "cache.db").write_bytes(b"\x00" * 8192)  # no header: not a database at all
    damaged = _database_failure(cache, _error("SQLITE_ERROR", "no such table: Cache"))
    assert isinstance(damaged, CacheUnreadable) and "docpilot cache clear" in str(damaged)
