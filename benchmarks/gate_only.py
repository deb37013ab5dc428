"""What a `--gate-only` run costs, split into start-up, index load and work.

Runs `docpilot eval --gate-only` with the default orchestrator (``auto``, no Prefect
API configured, so it runs inline) on a generated golden set of N questions about the
demo docs, several times in fresh processes, beside `python -c "import prefect"` (the
floor any Prefect-orchestrated tool pays), and reports medians:

- total: wall time of the whole command;
- startup: interpreter start and imports (`import docpilot.cli, docpilot.run.evaluation`);
- index: loading the corpus and building or loading the index (in-process);
- work: the pipeline's own wall time from the report;
- peak RSS of the eval process (also for a second, larger set with --big).

    python -m benchmarks.gate_only [--records 1000] [--repeat 5] [--big 10000] [--json]
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

from benchmarks.harness import make_golden  # noqa: E402


def timed(args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr}")
    return time.perf_counter() - start, proc.stdout


def peak_rss_mb(args: list[str], env: dict) -> float:
    """Peak resident memory of one child run, in MB (read after it exits)."""
    code = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], capture_output=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    return int(out.stdout.strip()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big", type=int, default=10000, help="records of the peak-memory run (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        golden = tmp / "golden.yaml"
        make_golden(golden, args.records)
        env = dict(os.environ, DOCPILOT_CACHE_DIR=str(tmp / "cache"), DOCPILOT_REPORTS_DIR=str(tmp / "reports"))
        env = {k: v for k, v in env.items() if not k.startswith("PREFECT_")}
        env["PREFECT_HOME"] = str(tmp / "prefect-home")
        eval_args = [sys.executable, "-m", "docpilot", "eval", "--gate-only",
                     "--golden", str(golden), "--no-cache", "--json"]
        timed(eval_args, env)  # builds the saved index once, as any second run would find it

        prefect, startup, index, total, work, orchestrators = [], [], [], [], [], set()
        for _ in range(args.repeat):
            prefect.append(timed([sys.executable, "-c", "import prefect"], env)[0])
            startup.append(timed([sys.executable, "-c", "import docpilot.cli, docpilot.run.evaluation"], env)[0])
            index.append(float(timed([sys.executable, "-c", (
                "import time; from docpilot.config.loading import load_config; from docpilot.assistant.workspace import open_workspace;"
                "c = load_config(None); t = time.perf_counter(); open_workspace(c, use_cache=False);"
                "print(time.perf_counter() - t)")], env)[1]))
            seconds, out = timed(eval_args, env)
            total.append(seconds)
            report = json.loads(Path(json.loads(out)["report"]).read_text())
            work.append(report["wall_ms"] / 1000)
            orchestrators.add(report["orchestrator"])

        median = statistics.median
        result = {
            "records": args.records,
            "repeat": args.repeat,
            "orchestrator": sorted(orchestrators),
            "import_prefect_s": round(median(prefect), 3),
            "total_s": round(median(total), 3),
            "startup_s": round(median(startup), 3),
            "index_load_s": round(median(index), 3),
            "work_s": round(median(work), 3),
            "ratio_total_to_import_prefect": round(median(total) / median(prefect), 3),
            "peak_rss_mb": round(peak_rss_mb(eval_args, env), 1),
        }
        if args.big:
            big = tmp / "big.yaml"
            make_golden(big, args.big)
            big_args = [*eval_args[:-4], "--golden", str(big), "--no-cache", "--json"]
            start = time.perf_counter()
            result[f"peak_rss_mb_{args.big}"] = round(peak_rss_mb(big_args, env), 1)
            result[f"wall_s_{args.big}"] = round(time.perf_counter() - start, 3)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
