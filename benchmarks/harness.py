"""How close the eval harness runs to the physical limit, and what a re-run costs.

Generates a golden set of N questions about the demo docs, starts the local
OpenAI-compatible test server in its own process answering every call after a fixed
latency, and runs `docpilot eval` (inline) against it:

1. first run: wall time of the pipeline against the ideal N × latency / concurrency;
2. re-run with nothing changed: model calls (counted by the server) and wall time;
3. one record edited: model calls;
4. with --prefect-api URL: the same cold run under `--orchestrator prefect` against a
   running `prefect server start`, against the inline run's wall.

    python -m benchmarks.harness [--records 1000] [--latency 0.2] [--concurrency 32]
                                 [--prefect-api http://127.0.0.1:4200/api] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.openai_server import Reply, serve_openai_process  # noqa: E402


def make_golden(path: Path, records: int, *, edit: int | None = None) -> None:
    """A golden set of generated questions about the demo docs' sections."""
    from docpilot.corpus import load_corpus

    corpus = load_corpus(ROOT / "docs")
    sections = [s for s in corpus.sections.values() if s.title]
    rows = []
    for i in range(records):
        section = sections[i % len(sections)]
        question = f"What does the manual say about {section.title.lower()}? (variant {i})"
        if edit is not None and i == edit:
            question += " Please be brief."
        rows.append({"id": f"q{i:05d}", "question": question, "gold": [section.id], "split": "dev",
                     "gold_answer": section.title})
    path.write_text(yaml.safe_dump(rows, sort_keys=False))


def requests_seen(base_url: str) -> int:
    return httpx.get(base_url.removesuffix("/v1") + "/stats").json()["requests"]


def run(golden: Path, cache: Path, base_url: str, concurrency: int, orchestrator: str) -> tuple[float, int]:
    """One eval; returns the pipeline's wall time in seconds and how many rows reused the model stage."""
    from docpilot.job import EvalJob
    from docpilot.settings import load_config
    from flows.eval import run_eval

    config = load_config(
        None,
        overrides={
            "golden": str(golden),
            "cache_dir": str(cache),
            "reports_dir": str(cache.parent / "reports"),
            "model": {"provider": "openai", "name": "bench", "base_url": base_url, "concurrency": concurrency},
            **({"shard_size": int(os.environ["SHARD"])} if os.environ.get("SHARD") else {}),
        },
    )
    report, _ = run_eval(EvalJob(config=config, golden=str(golden)), orchestrator)
    reused = sum("model" in r.cached for r in report.rows)
    return report.wall_ms / 1000, reused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--prefect-api", help="API URL of a running Prefect server, to time the prefect orchestrator")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    os.chdir(ROOT)
    ideal = args.records * args.latency / args.concurrency
    out: dict = {"records": args.records, "latency_s": args.latency, "concurrency": args.concurrency,
                 "ideal_s": round(ideal, 3)}
    with tempfile.TemporaryDirectory() as tmp, serve_openai_process(Reply(latency_s=args.latency)) as base_url:
        tmp = Path(tmp)
        golden = tmp / "golden.yaml"
        make_golden(golden, args.records)

        before = requests_seen(base_url)
        first, _ = run(golden, tmp / "cache", base_url, args.concurrency, "inline")
        calls = requests_seen(base_url) - before
        out["first_run"] = {"wall_s": round(first, 3), "model_calls": calls, "ratio_to_ideal": round(first / ideal, 3)}

        before = requests_seen(base_url)
        again, reused = run(golden, tmp / "cache", base_url, args.concurrency, "inline")
        out["rerun_unchanged"] = {"wall_s": round(again, 3), "model_calls": requests_seen(base_url) - before,
                                  "rows_reused": reused, "share_of_first": round(again / first, 4)}

        make_golden(golden, args.records, edit=7)
        before = requests_seen(base_url)
        edited, _ = run(golden, tmp / "cache", base_url, args.concurrency, "inline")
        out["one_record_edited"] = {"wall_s": round(edited, 3), "model_calls": requests_seen(base_url) - before}

        if args.prefect_api:
            os.environ["PREFECT_API_URL"] = args.prefect_api
            start = time.perf_counter()
            under_prefect, _ = run(golden, tmp / "cache-prefect", base_url, args.concurrency, "prefect")
            total = time.perf_counter() - start
            out["prefect"] = {"pipeline_wall_s": round(under_prefect, 3), "process_wall_s": round(total, 3),
                              "ratio_to_inline": round(under_prefect / first, 3)}

    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
