"""The client's overhead per turn when `docpilot eval --target` measures an assistant DocPilot did not build.

Starts the fixed-latency server of ``tests.support.latency_server`` in its own process
(every reply exactly ``--latency`` after its request arrived) and measures it as a
target: an OpenAI-compatible chat endpoint, its reply read by JMESPath paths, streamed
(SSE, first token from the first delta) or not (``--json``). The whole command runs in a
fresh process, as a user types it, over ``--records`` generated questions about the
demo docs at ``--concurrency``; its wall time is compared with the physical limit
⌈N / C⌉ × latency, the figure DocPilot's own server runtime is held to (≤ 1.15 ×).

    python -m benchmarks.target_overhead [--records 1000] [--latency 0.2] [--concurrency 32] [--json-reply]

On a machine that other work shares, the figure moves with it: ``cpu_check_ms`` is
printed before and after, as ``benchmarks.harness`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import cpu_check_ms, make_golden  # noqa: E402
from tests.support.latency_server import serve_latency_process  # noqa: E402
from tests.support.openai_server import Reply  # noqa: E402


def target_config(base_url: str, *, stream: bool) -> dict:
    """The latency server as a target: its chat completions, read by paths (no sources, so no ranking)."""
    reply = ({"kind": "sse", "answer": "choices[0].delta.content"} if stream
             else {"kind": "json", "answer": "choices[0].message.content"})
    return {"url": f"{base_url}/chat/completions",
            "body": {"model": "bench", "stream": stream, "messages": [{"role": "user", "content": "{question}"}]},
            "reply": reply}


def whole_command(folder: Path, base_url: str, records: int, concurrency: int, stream: bool) -> dict:
    """One `docpilot eval --target bench` in a fresh process; its wall time and the report's."""
    golden = folder / "golden.yaml"
    make_golden(golden, records)
    config = {"corpus": {"docs": str(ROOT / "docs")}, "golden": str(golden), "cache_dir": str(folder / "cache"),
              "reports_dir": str(folder / "reports"), "model": {"concurrency": concurrency},
              "targets": {"bench": target_config(base_url, stream=stream)}}
    (folder / "docpilot.yaml").write_text(yaml.safe_dump(config))
    out = folder / "report.json"
    args = [sys.executable, "-m", "docpilot", "eval", "--config", str(folder / "docpilot.yaml"), "--target", "bench",
            "--orchestrator", "inline", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"docpilot eval exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
    report = json.loads(out.read_text())
    errors = sum(r["error"] is not None for r in report["rows"])
    return {"command_s": seconds, "wall_s": report["wall_ms"] / 1000, "errors": errors,
            "latency_p50_ms": report["summary"].get("latency_p50"),
            "first_token_p50_ms": report["summary"].get("first_token_p50")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json-reply", action="store_true", help="a JSON reply instead of a stream")
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    args = parser.parse_args()
    before = cpu_check_ms()
    with serve_latency_process(Reply(latency_s=args.latency)) as base_url, \
            tempfile.TemporaryDirectory(prefix="docpilot-target-bench-") as tmp:
        figures = whole_command(Path(tmp), base_url, args.records, args.concurrency, stream=not args.json_reply)
    limit_s = math.ceil(args.records / args.concurrency) * args.latency
    result = {"records": args.records, "latency_s": args.latency, "concurrency": args.concurrency,
              "reply": "json" if args.json_reply else "sse", **figures, "limit_s": limit_s,
              "command_over_limit": figures["command_s"] / limit_s, "stages_over_limit": figures["wall_s"] / limit_s,
              "cpu_check_ms": [before, cpu_check_ms()]}
    if not args.json:
        print(f"{args.records} records, {args.latency * 1000:.0f} ms target, c{args.concurrency}, {result['reply']}: "
              f"command {figures['command_s']:.2f} s, stages {figures['wall_s']:.2f} s, "
              f"limit ⌈N/C⌉·L {limit_s:.2f} s → command {result['command_over_limit']:.3f} ×, "
              f"stages {result['stages_over_limit']:.3f} ×; errors {figures['errors']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
