"""What an endpoint that ignores max_tokens costs an eval: its peak memory against a normal endpoint's.

Serves each kind of endpoint from this process (``tests.support.openai_server``) and runs
`docpilot eval` against it in a fresh process, as a user types it, over a generated golden
set about the demo docs (``benchmarks.harness``); only that process's memory is measured:

    normal     a short streamed answer that finishes (``finish_reason: stop``)
    endless    answer deltas without end, never finished: only the client's cap ends a turn
    huge       one 10 MB delta, then ``finish_reason: stop``

For each it reports the command's peak resident memory (the child's ``ru_maxrss``, read by
``os.wait4``), its wall time, the report's size and the rows' error codes. ``ratio`` is the
peak of each misbehaving endpoint over the normal one's; the cap is meant to keep it at
1.5 or below, whatever the endpoint sends. An unmeasured run first builds the search index,
so that every measured run loads it alike.

    .venv/bin/python -m benchmarks.reply_cap [--records 24] [--concurrency 8] [--max-tokens 512]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import make_golden  # noqa: E402
from tests.support.openai_server import OpenAIScript, Reply, serve_openai  # noqa: E402

ENDPOINTS = {
    "normal": Reply(answer="Set the token in the Authorization header [1].", pieces=8),
    "endless": Reply(answer="and so on ", endless=True),
    "huge": Reply(answer="x" * 10_000_000, pieces=1, finish_reason="stop"),
}


def measure(kind: str, golden: Path, tmp: Path, concurrency: int, max_tokens: int) -> dict:
    """One `docpilot eval` against the ``kind`` endpoint: peak RSS, wall time, report size, error codes."""
    out = tmp / f"report-{kind}.json"
    config = tmp / f"config-{kind}.yaml"
    config.write_text(f"model:\n  max_tokens: {max_tokens}\n  timeout_s: 60\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DOCPILOT_CACHE_DIR=str(tmp / "cache"), PREFECT_HOME=str(tmp / "prefect-home"))
    with serve_openai(OpenAIScript(default=ENDPOINTS[kind])) as base_url:
        args = [sys.executable, "-m", "docpilot", "eval", "--config", str(config), "--golden", str(golden),
                "--provider", "openai", "--model", "bench", "--base-url", base_url,
                "--concurrency", str(concurrency), "--no-cache", "--orchestrator", "inline", "--out", str(out)]
        started = time.perf_counter()
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # wait4 gives this child's own peak, where RUSAGE_CHILDREN would give the largest of all children so far.
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        if process.stderr:
            process.stderr.close()
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):  # 1 is a failed gate, still a finished run
        raise RuntimeError(f"docpilot eval against the {kind} endpoint exited with {process.returncode}:\n{stderr}")
    rows = json.loads(out.read_text())["rows"]
    return {
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux reports kilobytes
        "command_s": round(seconds, 2),
        "report_kib": round(out.stat().st_size / 1024, 1),
        "error_codes": dict(Counter(str(row.get("error_code")) for row in rows)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args()
    out: dict = {"records": args.records, "concurrency": args.concurrency, "max_tokens": args.max_tokens,
                 "load_average": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        golden = tmp_path / "golden.yaml"
        make_golden(golden, args.records)
        measure("normal", golden, tmp_path, args.concurrency, args.max_tokens)  # builds the index
        for kind in ENDPOINTS:
            out[kind] = measure(kind, golden, tmp_path, args.concurrency, args.max_tokens)
    normal = out["normal"]["peak_rss_mib"]
    out["ratio"] = {kind: round(out[kind]["peak_rss_mib"] / normal, 3) for kind in ENDPOINTS if kind != "normal"}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
