"""A big `--gate-only` run inline and on a two-worker Dask cluster: wall time and peak memory.

Generates a golden set of N questions about the sections of a docs folder (the Prefect
docs in ../shared/data when present, else this project's docs/), builds the index
once, then runs the same eval twice, each in a fresh process with an empty stage
cache:

- inline: `evaluate(job, plan(config, Options(orchestrator="inline")).executor)`, every shard in the one process;
- dask: `evaluate(job, plan(config, Options(runner="dask")).executor)`, the shards on a local cluster of two worker
  processes, under Prefect. With no PREFECT_API_URL the run starts (and stops) its own
  Prefect server, as `docpilot eval --runner dask` does, and that is in the figures.

For each: wall time of the process, the pipeline's own wall time (from the report),
and the peak resident memory of the whole process tree (the eval process, the Prefect
server, the Dask scheduler, nannies and workers), sampled every 50 ms. The two runs'
summaries are compared as well. Prints JSON.

    python -m benchmarks.dask_scale [--records 10000] [--docs PATH] [--shard-size 250]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PREFECT_DOCS = ROOT.parent / "shared" / "data" / "prefect-docs" / "docs"
SAMPLE_S = 0.05
TIMING_METRICS = ("latency_", "first_token_", "stage_")


def make_golden(path: Path, docs: Path, records: int) -> int:
    """A golden set of ``records`` questions, one section of ``docs`` each, in turn; returns the section count."""
    import yaml

    from docpilot.corpus.pages import load_corpus

    sections = [s for s in load_corpus(docs).sections.values() if s.title]
    forms = ("How do I {}?", "What does the documentation say about {}?", "Where can I read about {}?",
             "Explain {} briefly.")
    rows = []
    for i in range(records):
        section = sections[i % len(sections)]
        question = forms[(i // len(sections)) % len(forms)].format(section.title.lower())
        rows.append({"id": f"q{i:05d}", "question": f"{question} (case {i})", "gold": [section.id],
                     "split": "dev" if i % 2 else "test"})
    path.write_text(yaml.safe_dump(rows, sort_keys=False), encoding="utf-8")
    return len(sections)


def _config(work: Path, docs: Path, golden: Path, variant: str, shard_size: int):
    from docpilot.config.loading import load_config
    from docpilot.config.model import RetrievalConfig

    overrides: dict = {
        "corpus": {"docs": str(docs)},
        "golden": str(golden),
        "cache_dir": str(work / variant / "cache"),
        "reports_dir": str(work / variant / "reports"),
        "shard_size": shard_size,
    }
    if "index_dir" in RetrievalConfig.model_fields:  # one index, built before the timed runs
        overrides["retrieval"] = {"index_dir": str(work / "index")}
    return load_config(None, overrides=overrides)


def run_variant(work: Path, docs: Path, golden: Path, variant: str, shard_size: int) -> dict:
    """One run, in this process: the report's figures as JSON-ready data."""
    from docpilot.flows.plan import Options, plan

    from docpilot.run.evaluation import evaluate
    from docpilot.run.job import EvalJob

    job = EvalJob(config=_config(work, docs, golden, variant, shard_size), golden=str(golden), gate_only=True)
    options = Options(runner="dask") if variant == "dask" else Options(orchestrator="inline")
    report = evaluate(job, plan(job.config, options).executor)
    summary = {k: v for k, v in report.summary.items() if not k.startswith(TIMING_METRICS)}
    return {"pipeline_wall_s": round(report.wall_ms / 1000, 2), "rows": len(report.rows),
            "computed": sum(not r.cached for r in report.rows), "summary": summary}


def measure(args: list[str]) -> dict:
    """Run a child process; its wall time, peak RSS of its process tree, and the JSON it printed."""
    import psutil

    start = time.perf_counter()
    child = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(child.pid)
    peak_tree = peak_main = 0
    while child.poll() is None:
        try:
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        total = 0
        for process in processes:
            try:
                rss = process.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            if process.pid == root.pid:
                peak_main = max(peak_main, rss)
        peak_tree = max(peak_tree, total)
        time.sleep(SAMPLE_S)
    out, err = child.communicate()
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({child.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result.update(process_wall_s=round(wall, 2), peak_rss_tree_mb=round(peak_tree / 2**20, 1),
                  peak_rss_main_mb=round(peak_main / 2**20, 1), stderr_lines=len(err.strip().splitlines()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--docs", type=Path, help="Docs folder; default: the Prefect docs, else docs/.")
    parser.add_argument("--shard-size", type=int, default=250)
    parser.add_argument("--variant", choices=["inline", "dask"], help=argparse.SUPPRESS)  # a child's run
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    docs = (args.docs or (PREFECT_DOCS if PREFECT_DOCS.is_dir() else ROOT / "docs")).resolve()

    if args.variant:
        from docpilot.tasks import quiet_prefect

        quiet_prefect()
        print(json.dumps(run_variant(args.work, docs, args.work / "golden.yaml", args.variant, args.shard_size)))
        return

    with tempfile.TemporaryDirectory(prefix="docpilot-dask-scale-") as tmp:
        work = Path(tmp)
        sections = make_golden(work / "golden.yaml", docs, args.records)
        from docpilot.assistant.workspace import open_workspace

        start = time.perf_counter()
        open_workspace(_config(work, docs, work / "golden.yaml", "warm-up", args.shard_size))
        index_s = time.perf_counter() - start
        out: dict = {"records": args.records, "docs": str(docs), "sections": sections,
                     "shard_size": args.shard_size, "cpus": os.cpu_count(), "index_build_s": round(index_s, 2),
                     "prefect_api": os.environ.get("PREFECT_API_URL") or "started for the dask run"}
        base = [sys.executable, "-m", "benchmarks.dask_scale", "--records", str(args.records), "--docs", str(docs),
                "--shard-size", str(args.shard_size), "--work", str(work)]
        for variant in ("inline", "dask"):
            out[variant] = measure([*base, "--variant", variant])
        out["same_summary"] = out["inline"].pop("summary") == out["dask"].pop("summary")
        out["dask_over_inline_wall"] = round(out["dask"]["process_wall_s"] / out["inline"]["process_wall_s"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
