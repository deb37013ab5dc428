"""What a run of several variants costs beside a run of one, and what it shares.

Three variants that differ only in their model, each on an endpoint of its own (a
latency server that answers every turn ``--latency-ms`` after it arrived, see
``tests.support.latency_server``) at ``--concurrency`` turns in flight each, over
``--records`` generated questions about the demo docs. Every command runs in a fresh
process with a fresh cache, as a user runs it. Figures (the issue's targets):

- ``ratio``: the three-variant command's wall time over one variant's, medians of
  ``--repeat`` runs of each, alternating (target ≤ 1.15): the variants' turns are in
  flight at once, each endpoint at its own concurrency, each variant in its own process;
  the servers end every answer with the request's number, so that no two are alike;
- ``retrieval_runs``: how many variants ranked the records themselves, of the three
  that share retrieval settings (target 1), and ``rankings_computed`` (= records);
- ``rerun_model_calls``: turns sent by the same command run again (target 0), counted
  by the servers;
- ``added_variant_model_calls``: a fourth variant added to the config file, run again:
  turns sent (target: that variant's records only, = records).

    .venv/bin/python -m benchmarks.variants --records 1000 --latency-ms 200 --concurrency 32

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import ROOT, make_golden, requests_seen  # noqa: E402
from tests.support.latency_server import serve_latency_process  # noqa: E402
from tests.support.openai_server import Reply  # noqa: E402


def variants_config(path: Path, golden: Path, urls: list[str], concurrency: int, *, extra: bool = False) -> Path:
    """A config file whose ``variants`` are one per endpoint (and, with ``extra``, a fourth on the first one)."""
    lines = [f"golden: {golden}", "model:", "  provider: openai", "  name: bench", f"  concurrency: {concurrency}",
             "variants:"]
    for index, url in enumerate(urls):
        lines += [f"  m{index + 1}:", f"    model.base_url: {url}"]
    if extra:
        lines += ["  m1-long:", f"    model.base_url: {urls[0]}", "    model.max_tokens: 256"]
    path.write_text("\n".join(lines) + "\n")
    return path


def eval_command(args: list[str], cache: Path, out: Path) -> tuple[float, dict]:
    """One `docpilot eval` in a fresh process; its wall seconds and its report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DOCPILOT_CACHE_DIR=str(cache), DOCPILOT_REPORTS_DIR=str(out.parent / "reports"))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "docpilot", "eval", *args, "--orchestrator", "inline",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"docpilot eval exited with {proc.returncode}:\n{proc.stderr}")
    return seconds, json.loads(out.read_text())


def turns_sent(urls: list[str], before: list[int]) -> int:
    """Completions the servers answered since ``before``: every one a turn (a run sends no probe)."""
    return sum(requests_seen(url) for url in urls) - sum(before)


def measure(records: int = 1000, latency_s: float = 0.2, concurrency: int = 32, repeat: int = 3) -> dict[str, object]:
    """Run the benchmark; the numbers it prints."""
    with tempfile.TemporaryDirectory(prefix="docpilot-variants-") as tmp, contextlib.ExitStack() as servers:
        work = Path(tmp)
        golden = work / "golden.yaml"
        make_golden(golden, records)
        urls = [servers.enter_context(serve_latency_process(Reply(latency_s=latency_s, numbered=True))) for _ in range(3)]
        config = variants_config(work / "variants.yaml", golden, urls, concurrency)
        ones, threes = [], []
        for attempt in range(repeat):  # alternating, each with a fresh cache
            one_s, _ = eval_command(["--golden", str(golden), "--provider", "openai", "--model", "bench",
                                     "--base-url", urls[0], "--concurrency", str(concurrency)],
                                    work / f"cache-one-{attempt}", work / "one.json")
            cache = work / f"cache-three-{attempt}"
            three_s, three = eval_command(["--config", str(config)], cache, work / "three.json")
            ones.append(one_s)
            threes.append(three_s)
        ranked = [v["cache_stats"]["retrieve"]["computed"] for v in three["variants"]]
        before = [requests_seen(url) for url in urls]
        rerun_s, _ = eval_command(["--config", str(config)], cache, work / "rerun.json")
        rerun_calls = turns_sent(urls, before)
        config = variants_config(work / "variants.yaml", golden, urls, concurrency, extra=True)
        before = [requests_seen(url) for url in urls]
        _, added = eval_command(["--config", str(config)], cache, work / "added.json")
        added_calls = turns_sent(urls, before)  # the added variant's alone
    return {
        "records": records,
        "latency_s": latency_s,
        "concurrency": concurrency,
        "repeat": repeat,
        "one_variant_s": [round(t, 3) for t in ones],
        "three_variants_s": [round(t, 3) for t in threes],
        "ratio": round(statistics.median(threes) / statistics.median(ones), 3),
        "retrieval_runs": sum(1 for count in ranked if count),
        "rankings_computed": sum(ranked),
        "rerun_s": round(rerun_s, 3),
        "rerun_model_calls": rerun_calls,
        "added_variant_model_calls": added_calls,
        "added_variant_model_computed": {v["name"]: v["cache_stats"]["model"]["computed"]
                                         for v in added["variants"]},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="questions (default 1000)")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="server latency per turn (default 200)")
    parser.add_argument("--concurrency", type=int, default=32, help="turns in flight per variant (default 32)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of one and of three, alternating (default 3)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.records, args.latency_ms / 1000.0, args.concurrency, args.repeat), indent=2))


if __name__ == "__main__":
    main()
