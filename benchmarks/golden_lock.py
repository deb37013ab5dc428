"""What the golden lock costs: writing it for a real set, checking against it, and what a run pays for reading it.

- **lock**: `docpilot golden lock` on the Prefect docs (955 pages) and their golden set,
  as a fresh process (start-up and reading the docs included), and in process, split
  into reading the docs and locking the set; the target is 5 s for the whole command;
- **check**: `docpilot golden check` with the lock beside the set, as a process;
- **runs**: `docpilot eval --gate-only` and `docpilot eval` on the demo docs, warm
  (caches filled), with no lock beside the set and with one: a set without a lock
  must cost nothing, and one with a lock a file read and a few digests.

Medians of ``--repeat`` runs. The Prefect figures are skipped, with a note, when the
docs are absent (``../shared/data``, or ``--docs``).

    python -m benchmarks.golden_lock [--docs DIR] [--golden FILE] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCPILOT = [sys.executable, "-m", "docpilot"]


def _timed(args: list[str], cwd: Path, ok: tuple[int, ...] = (0, 1)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return took


def _median(times: list[float]) -> float:
    return round(statistics.median(times), 3)


def lock_figures(docs: Path, golden: Path, repeat: int) -> dict:
    """The lock of ``golden`` over ``docs``: as a process, and in process split into its parts."""
    from docpilot.corpus.pages import load_corpus
    from docpilot.golden.loading import load_golden
    from docpilot.golden.lock import build_lock, lock_text

    with tempfile.TemporaryDirectory(prefix="docpilot-lock-bench-") as folder:
        work = Path(folder)
        shutil.copy(golden, work / "golden.yaml")
        command = [*DOCPILOT, "golden", "lock", "--docs", str(docs), "--golden", "golden.yaml"]
        process = [_timed(command, work, ok=(0,)) for _ in range(repeat)]
        check = [_timed([*DOCPILOT, "golden", "check", "--docs", str(docs), "--golden", "golden.yaml"], work)
                 for _ in range(repeat)]
        size = (work / "golden.lock").stat().st_size
    reading, locking = [], []
    records = load_golden(golden)
    for _ in range(repeat):
        started = time.perf_counter()
        corpus = load_corpus(docs)
        reading.append(time.perf_counter() - started)
        started = time.perf_counter()
        lock_text(build_lock(records, corpus))
        locking.append(time.perf_counter() - started)
    return {"docs": str(docs), "pages": len(corpus.pages), "records": len(records),
            "positives": sum(bool(r.gold) for r in records), "lock_bytes": size,
            "golden_lock_s": _median(process), "golden_check_s": _median(check),
            "read_docs_s": _median(reading), "build_lock_s": _median(locking)}


def run_figures(repeat: int) -> dict:
    """Warm demo evals, full and gate-only, without a lock beside the set and with one."""
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="docpilot-lock-runs-") as folder:
        work = Path(folder)
        for name in ("docs", "evals", "configs"):
            shutil.copytree(ROOT / name, work / name)
        (work / "evals" / "golden.lock").unlink(missing_ok=True)
        for lock in (False, True):
            if lock:
                _timed([*DOCPILOT, "golden", "lock"], work, ok=(0,))
            for mode, extra in (("eval", []), ("gate_only", ["--gate-only"])):
                command = [*DOCPILOT, "eval", *extra, "--out", "report.json"]
                _timed(command, work)  # fills the caches
                figures[f"{mode}_{'lock' if lock else 'no_lock'}_s"] = _median(
                    [_timed(command, work) for _ in range(repeat)])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=ROOT.parent / "shared" / "data" / "prefect-docs" / "docs")
    parser.add_argument("--golden", type=Path, default=ROOT / "benchmarks" / "data" / "prefect-golden.yaml")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result: dict = {}
    if args.docs.is_dir():
        result["lock"] = lock_figures(args.docs, args.golden, args.repeat)
    else:
        result["lock"] = None
        print(f"note: {args.docs} is absent: the Prefect lock figures are skipped", file=sys.stderr)
    result["runs"] = run_figures(args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    lock = result["lock"]
    if lock:
        print(f"golden lock, {lock['positives']} positives over {lock['pages']} pages: {lock['golden_lock_s']:.2f} s "
              f"as a process (target 5 s); in process {lock['read_docs_s']:.2f} s reading the docs + "
              f"{lock['build_lock_s']:.3f} s locking; lock file {lock['lock_bytes'] / 1024:.0f} KiB; "
              f"golden check with it {lock['golden_check_s']:.2f} s")
    runs = result["runs"]
    for mode in ("eval", "gate_only"):
        print(f"demo {mode.replace('_', '-')}: {runs[f'{mode}_no_lock_s']:.2f} s without a lock, "
              f"{runs[f'{mode}_lock_s']:.2f} s with one (median of {args.repeat}, warm)")


if __name__ == "__main__":
    main()
