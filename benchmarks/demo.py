"""What `docpilot eval` on the demo costs a new user, against `python -c "import prefect"`.

Runs the command as typed in the project folder, default flags (``--orchestrator
auto``), warm (its cache filled by one run first), with no Prefect API configured (a
throw-away ``PREFECT_HOME``, no ``PREFECT_API_URL``), ``--repeat`` times in fresh
processes, alternating with ``python -c "import prefect"``, the floor any tool that
runs through Prefect pays. Reports both medians and their ratio, and the orchestrator
the run chose. With ``--orchestrator X`` it times that choice instead.

    python -m benchmarks.demo [--repeat 7] [--orchestrator auto|inline|prefect] [--json]
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


def timed(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, proc


def measure(repeat: int, orchestrator: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(PREFECT_HOME=str(tmp / "prefect-home"), DOCPILOT_CACHE_DIR=str(tmp / "cache"),
                   DOCPILOT_REPORTS_DIR=str(tmp / "reports"))
        command = [sys.executable, "-m", "docpilot", "eval"]
        if orchestrator != "auto":
            command += ["--orchestrator", orchestrator]
        timed(command, env)  # fills the cache and builds the index: the runs below are warm
        evals, imports, chosen = [], [], set()
        for _ in range(repeat):
            imports.append(timed([sys.executable, "-c", "import prefect"], env)[0])
            seconds, proc = timed(command, env)
            evals.append(seconds)
            chosen.update(line.split()[1].rstrip(",") for line in proc.stdout.splitlines()
                          if line.startswith("orchestrator:"))
    eval_s, import_s = statistics.median(evals), statistics.median(imports)
    return {"repeat": repeat, "orchestrator": sorted(chosen), "eval_s": round(eval_s, 3),
            "import_prefect_s": round(import_s, 3), "ratio": round(eval_s / import_s, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--orchestrator", choices=["auto", "inline", "prefect"], default="auto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.repeat, args.orchestrator)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
