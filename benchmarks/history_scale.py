"""How long the run index and `docpilot history` take over a long store of nightly runs.

Writes ``--runs`` reports (default 1,000) of ``--records`` records each (default 100)
into a report folder, as a series of nights of one system with a record or two
flipping by chance (``tests.support.run_series``: valid reports whose summaries
are scored from their rows). Then times:

1. the index rebuilt from the reports: the index file deleted, then
   ``RunIndex(folder).refresh()`` (target: at most 10 s for 1,000 reports);
2. the first ``docpilot history`` after the rebuild, as a fresh process: it works out
   and stores each shown run's comparison with the one before it and the drift check
   (reading the two reports drift pairs), as the first command after a night's run does
   for that one night;
3. the whole ``docpilot history`` command over the folder, as a fresh process with
   an index up to date, the median of ``--repeat`` further runs (target: at most
   0.5 s over 1,000 runs of 100 records);
4. the same with ``--json``, for scale.

    python -m benchmarks.history_scale [--runs 1000] [--records 100] [--repeat 5] [--folder DIR] [--json]

A ``--folder`` that already holds the reports is reused (its reports are not written again).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docpilot.history.index import INDEX_FILE, RunIndex  # noqa: E402
from tests.support.run_series import write_series  # noqa: E402

HISTORY_TARGET_S = 0.5
"""`docpilot history` over 1,000 runs of 100 records."""

REBUILD_TARGET_S = 10.0
"""The index rebuilt from 1,000 reports."""


def prepare(folder: Path, runs: int, records: int) -> float:
    """Write the series unless the folder already holds it; seconds spent writing."""
    if len(list(folder.glob("*.json"))) >= runs:
        return 0.0
    start = time.perf_counter()
    write_series(folder, runs, records=records)
    return time.perf_counter() - start


def time_rebuild(folder: Path) -> tuple[float, int]:
    """Seconds to rebuild the index from nothing, and the runs it then holds."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{folder / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    start = time.perf_counter()
    index = RunIndex(folder)
    problems = index.refresh()
    elapsed = time.perf_counter() - start
    if problems:
        raise SystemExit(f"the generated reports should all be readable: {problems[0]}")
    return elapsed, len(index.runs())


def time_command(folder: Path, repeat: int, *extra: str) -> list[float]:
    """Wall seconds of ``docpilot history`` in a fresh process, ``repeat`` times."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "docpilot", "history", "--reports", str(folder), *extra],
                                capture_output=True, text=True, env=env, cwd=folder)
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise SystemExit(f"docpilot history failed: {result.stderr.strip()}")
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--folder", type=Path, help="Report folder to use (default: a temporary one).")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="docpilot-history-") as scratch:
        folder = args.folder or Path(scratch) / "reports"
        folder.mkdir(parents=True, exist_ok=True)
        written_s = prepare(folder, args.runs, args.records)
        rebuild_s, indexed = time_rebuild(folder)
        (first_s,) = time_command(folder, 1)
        history = time_command(folder, args.repeat)
        history_json = time_command(folder, args.repeat, "--json")
    full_size = args.runs >= 1000 and args.records >= 100
    figures = {
        "runs": indexed, "records": args.records, "written_s": round(written_s, 2),
        "rebuild_s": round(rebuild_s, 3), "rebuild_target_s": REBUILD_TARGET_S, "history_first_s": round(first_s, 3),
        "history_median_s": round(statistics.median(history), 3), "history_target_s": HISTORY_TARGET_S,
        "history_json_median_s": round(statistics.median(history_json), 3),
        "targets_apply": full_size,
        "rebuild_ok": rebuild_s <= REBUILD_TARGET_S, "history_ok": statistics.median(history) <= HISTORY_TARGET_S,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{indexed} runs of {args.records} records (written in {written_s:.1f} s)")
        print(f"index rebuilt from the reports: {rebuild_s:.3f} s (target ≤ {REBUILD_TARGET_S:g} s)")
        print(f"docpilot history, first after the rebuild (comparisons worked out): {first_s:.3f} s")
        print(f"docpilot history, median of {args.repeat}: {statistics.median(history):.3f} s "
              f"(target ≤ {HISTORY_TARGET_S:g} s); with --json {statistics.median(history_json):.3f} s")
        if not full_size:
            print("(the targets are set for 1,000 runs of 100 records)")
    return figures


if __name__ == "__main__":
    main()
