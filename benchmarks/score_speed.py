"""How long `docpilot score` takes on a large report, whole process, against a script that loads the same
report and runs pytrec_eval on it.

Writes a gate-only report of ``--rows`` rows (``benchmarks.summary_speed.make_rows``: about
three in four positives, the rest negatives and attack probes) with its summary, then times,
alternately, ``--repeat`` times each, in fresh processes:

1. ``docpilot score REPORT --json``: the report read and checked, every metric summarised again,
   the gates checked, the verdict printed;
2. ``python -c``: the report read with ``json``, pytrec_eval's qrels and run built from its
   positives, recall@1/3/5/8, MRR and nDCG@8 computed;
3. ``python -c``: the floor under (1), what ``score`` cannot leave out while it checks the
   report: its imports (click, NumPy, the schema's models) and the report read and checked
   against the schema as ``score`` reads it (``load_report``), with nothing computed.

The figure is the median of (1) ÷ the median of (2); ``floor_ratio`` is (3) ÷ (2).

    python -m benchmarks.score_speed [--rows 10000] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PYTREC_SCRIPT = """
import json, sys, pytrec_eval
rows = json.load(open(sys.argv[1]))["rows"]
positives = [r for r in rows if r["kind"] == "positive" and r["gold"]]
qrels = {r["id"]: {g: 1 for g in r["gold"]} for r in positives}
run = {r["id"]: {s: float(len(r["retrieved"]) - k) for k, s in enumerate(r["retrieved"])} for r in positives}
found = pytrec_eval.RelevanceEvaluator(qrels, {"recall.1,3,5,8", "recip_rank", "ndcg_cut.8"}).evaluate(run)
print(json.dumps({m: sum(v[m] for v in found.values()) / len(found) for m in ("recall_8", "recip_rank")}))
"""

FLOOR_SCRIPT = """
import sys, click, numpy
from docpilot.reports.report import load_report
load_report(sys.argv[1])
"""


def write_report(path: Path, rows: int) -> None:
    """A gate-only report of ``rows`` generated rows, its summary worked out as a run's is."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.summary_speed import make_rows
    from docpilot.config.model import Config
    from docpilot.reports.report import assemble_report
    from docpilot.reports.report import write_report as write
    from docpilot.run.job import EvalJob

    job = EvalJob(config=Config(), golden="evals/golden.yaml", gate_only=True)
    report = assemble_report(job, make_rows(rows), wall_ms=1.0, orchestrator="inline", corpus_fingerprint="0" * 64)
    write(report, str(path))


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{command[:4]} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def measure(rows: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        write_report(report, rows)
        ours_command = [sys.executable, "-m", "docpilot", "score", str(report), "--json"]
        theirs_command = [sys.executable, "-c", PYTREC_SCRIPT, str(report)]
        floor_command = [sys.executable, "-c", FLOOR_SCRIPT, str(report)]
        timed(ours_command), timed(theirs_command), timed(floor_command)  # warm the disk cache and the bytecode
        ours, theirs, floor = [], [], []
        for _ in range(repeat):
            ours.append(timed(ours_command))
            theirs.append(timed(theirs_command))
            floor.append(timed(floor_command))
    return {"rows": rows, "score_s": round(statistics.median(ours), 3),
            "load_and_pytrec_s": round(statistics.median(theirs), 3),
            "checked_load_s": round(statistics.median(floor), 3),
            "ratio": round(statistics.median(ours) / statistics.median(theirs), 2),
            "floor_ratio": round(statistics.median(floor) / statistics.median(theirs), 2),
            "score_runs_s": [round(s, 3) for s in ours], "pytrec_runs_s": [round(s, 3) for s in theirs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.rows, args.repeat)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"docpilot score, {figures['rows']:,} rows: {figures['score_s']} s; load + pytrec_eval: "
              f"{figures['load_and_pytrec_s']} s; ratio {figures['ratio']}; the imports and checked load alone: "
              f"{figures['checked_load_s']} s, ratio {figures['floor_ratio']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
