"""What tracing costs an eval: on against off, and off against the code before tracing existed.

1. ``on ÷ off``: `docpilot eval` of ``--records`` generated questions about the demo
   docs (``benchmarks.harness.make_golden``) against a local model that answers every
   call ``--latency`` seconds after it arrived (``tests.support.latency_server``), at
   ``--concurrency`` turns in flight, each command in a fresh process with a cold cache.
   "On" points ``OTEL_EXPORTER_OTLP_ENDPOINT`` at a real OTLP/HTTP receiver on 127.0.0.1
   (``tests.support.otlp_receiver``, which decodes every span it is sent); "off" sets
   nothing. The commands alternate, ``--repeat`` of each; the figure is the ratio of
   the median wall times, start to exit (target: at most 1.05 for 1,000 records × 200 ms
   at 32).
2. ``off ÷ before``: the demo eval (the project's docs and golden set, default flags,
   warm cache) with tracing off, against the same command run by the code of
   ``--baseline`` (a git revision, exported with ``git archive`` to a temporary folder;
   by default the merge base of HEAD and ``main``), both on this checkout's docs and
   golden set so that only the code differs. Alternating, ``--repeat`` of each, ratio
   of the medians (target: at most 1.02).

    python -m benchmarks.tracing_overhead [--records 1000] [--latency 0.2] [--concurrency 32] [--repeat 5]
                                          [--baseline REV] [--skip-demo] [--skip-eval] [--json]

Tiny, to check that it runs: ``--records 20 --latency 0.02 --repeat 1``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import cpu_check_ms, make_golden  # noqa: E402
from tests.support.latency_server import serve_latency_process  # noqa: E402
from tests.support.openai_server import Reply  # noqa: E402
from tests.support.otlp_receiver import otlp_receiver  # noqa: E402


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Prefect's or OpenTelemetry's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "OTEL_", "DOCPILOT_"))}
    return {**env, **extra}


def _timed(args: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1 is a failed gate: still a finished run
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc


def traced_against_untraced(records: int, latency_s: float, concurrency: int, repeat: int) -> dict:
    """Whole commands, cold cache, tracing on and off in turn; the medians and their ratio."""
    times: dict[str, list[float]] = {"on": [], "off": []}
    spans: list[int] = []
    with tempfile.TemporaryDirectory() as tmp, serve_latency_process(Reply(latency_s=latency_s)) as base_url, \
            otlp_receiver() as collector:
        tmp = Path(tmp)
        golden = tmp / "golden.yaml"
        make_golden(golden, records)
        for attempt in range(repeat):
            for mode in ("off", "on") if attempt % 2 == 0 else ("on", "off"):
                run = tmp / f"{mode}-{attempt}"
                env = _clean_env(DOCPILOT_CACHE_DIR=str(run / "cache"), PREFECT_HOME=str(tmp / "prefect-home"))
                if mode == "on":
                    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.url
                before = len(collector.spans)
                args = [sys.executable, "-m", "docpilot", "eval", "--golden", str(golden), "--provider", "openai",
                        "--model", "bench", "--base-url", base_url, "--concurrency", str(concurrency),
                        "--out", str(run / "report.json")]
                seconds, proc = _timed(args, cwd=ROOT, env=env)
                if mode == "on":
                    spans.append(len(collector.spans) - before)
                    if "warning" in proc.stderr:
                        raise SystemExit(f"the traced run warned:\n{proc.stderr[-2000:]}")
                times[mode].append(seconds)
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    return {"records": records, "latency_s": latency_s, "concurrency": concurrency, "repeat": repeat,
            "ideal_s": round(records * latency_s / concurrency, 3),
            "on_s": [round(t, 3) for t in times["on"]], "off_s": [round(t, 3) for t in times["off"]],
            "spans_per_traced_run": spans, "on_over_off": round(on / off, 4), "target": 1.05}


def _export(revision: str, into: Path) -> None:
    """The tree of ``revision`` written to ``into`` (``git archive``: no worktree, nothing in the repository changes)."""
    archive = subprocess.run(["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def _merge_base() -> str:
    out = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("no merge base of HEAD and main; name the code before tracing with --baseline REV")
    return out.stdout.strip()


def untraced_against_before(repeat: int, baseline: str) -> dict:
    """The demo eval, warm, tracing off, this code and ``baseline``'s in turn; the medians and their ratio."""
    times: dict[str, list[float]] = {"now": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before_tree = tmp / "before"
        _export(baseline, before_tree)
        trees = {"now": ROOT, "before": before_tree}
        inputs = ["--docs", str(ROOT / "docs"), "--golden", str(ROOT / "evals" / "golden.yaml")]

        def command(which: str, out: Path) -> tuple[list[str], dict[str, str]]:
            env = _clean_env(PYTHONPATH=str(trees[which]), DOCPILOT_CACHE_DIR=str(tmp / f"cache-{which}"),
                             PREFECT_HOME=str(tmp / "prefect-home"))
            return [sys.executable, "-m", "docpilot", "eval", *inputs, "--out", str(out)], env

        for which in trees:  # warm each cache (and index) once, untimed
            args, env = command(which, tmp / f"warm-{which}.json")
            _timed(args, cwd=trees[which], env=env)
        for attempt in range(repeat):
            for which in ("now", "before") if attempt % 2 == 0 else ("before", "now"):
                args, env = command(which, tmp / f"{which}-{attempt}.json")
                times[which].append(_timed(args, cwd=trees[which], env=env)[0])
    now, before = statistics.median(times["now"]), statistics.median(times["before"])
    return {"baseline": baseline, "repeat": repeat, "now_s": [round(t, 3) for t in times["now"]],
            "before_s": [round(t, 3) for t in times["before"]], "now_over_before": round(now / before, 4),
            "target": 1.02}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call (default 0.2)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5, help="commands of each kind (default 5)")
    parser.add_argument("--baseline", help="git revision of the code before tracing (default: merge base with main)")
    parser.add_argument("--skip-eval", action="store_true", help="leave out the on ÷ off measurement")
    parser.add_argument("--skip-demo", action="store_true", help="leave out the off ÷ before measurement")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    result: dict = {"cpu_check_ms_before": cpu_check_ms()}
    if not args.skip_eval:
        result["tracing_on_over_off"] = traced_against_untraced(args.records, args.latency, args.concurrency,
                                                                args.repeat)
    if not args.skip_demo:
        result["demo_off_over_before"] = untraced_against_before(args.repeat, args.baseline or _merge_base())
    result["cpu_check_ms_after"] = cpu_check_ms()
    if args.json:
        print(json.dumps(result))
        return
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
