"""How close concurrent model calls come to the ideal wall time.

Runs N turns of the openai model against the local test server, which waits a fixed
latency before each reply, with one shared ``httpx.AsyncClient`` and an
``asyncio.Semaphore`` bounding the turns in flight, as the model stage does. With
perfect overlap the run takes ``N * latency / concurrency``; ``ratio`` is the measured
wall time over that ideal (1.0 is perfect; the client's own work pushes it above).
The server runs in its own process so that its work does not compete with the client's.

    .venv/bin/python -m benchmarks.model_concurrency --records 1000 --concurrency 32

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from docpilot.models.base import Prompt, Turn  # noqa: E402
from docpilot.models.openai import OpenAIModel  # noqa: E402
from tests.support.openai_server import Reply, serve_openai_process  # noqa: E402


def _prompt(i: int) -> Prompt:
    question = f"How do I configure option {i}?"
    return Prompt(
        question=question,
        messages=[
            {"role": "system", "content": "Answer from the numbered sources; cite them as [n]."},
            {"role": "user", "content": question},
        ],
    )


async def _run_turns(base_url: str, records: int, concurrency: int) -> tuple[float, list[Turn]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        model = OpenAIModel(base_url=base_url, model="bench", client=client, retries=0)
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> Turn:
            async with gate:
                return await model.complete(_prompt(i))

        # One untimed round opens the pool's connections, as a long run would have them open.
        await asyncio.gather(*(one(i) for i in range(concurrency)))
        started = time.perf_counter()
        turns = await asyncio.gather(*(one(i) for i in range(records)))
        return time.perf_counter() - started, turns


def measure(records: int = 1000, concurrency: int = 32, latency_s: float = 0.2) -> dict[str, object]:
    """Run the benchmark; the numbers it prints."""
    with serve_openai_process(Reply(latency_s=latency_s)) as base_url:
        wall_s, turns = asyncio.run(_run_turns(base_url, records, concurrency))
    ideal_s = records * latency_s / concurrency
    latencies = [t.latency_ms for t in turns if t.latency_ms is not None]
    return {
        "records": records,
        "concurrency": concurrency,
        "latency_s": latency_s,
        "wall_s": round(wall_s, 3),
        "ideal_s": round(ideal_s, 3),
        "ratio": round(wall_s / ideal_s, 3) if ideal_s else None,
        "errors": sum(t.error is not None for t in turns),
        "error_kinds": sorted({t.error.split(";")[0][:120] for t in turns if t.error}),
        "turn_latency_p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "turn_latency_max_ms": round(max(latencies), 1) if latencies else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="turns to run (default 1000)")
    parser.add_argument("--concurrency", type=int, default=32, help="turns in flight (default 32)")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="server latency per turn (default 200)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.records, args.concurrency, args.latency_ms / 1000.0), indent=2))


if __name__ == "__main__":
    main()
