"""How close concurrent model calls come to the ideal wall time.

Runs N turns of the openai model against a local server that answers each request a
fixed latency after it arrived (``tests.support.latency_server``), the way the model
lane runs them: ``concurrency`` workers taking turns from one queue, every
``TURNS_PER_CLIENT`` workers sharing one client. With perfect overlap the run takes
``N * latency / concurrency``; ``ratio`` is the measured wall time over that ideal (1.0
is perfect; the client's own work pushes it above), and ``client_cpu_s`` the CPU time
this process spent during the timed run (the client's own work, since the server runs
in its own process so that it does not compete with it). ``--scripted-server`` uses the
Starlette test server instead, to show what its own work per request adds.

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


from docpilot.models.base import Prompt, Turn  # noqa: E402
from docpilot.models.openai import OpenAIModel  # noqa: E402
from docpilot.run.lane import TURNS_PER_CLIENT  # noqa: E402
from tests.support.latency_server import serve_latency_process  # noqa: E402
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


async def _run_turns(base_url: str, records: int, concurrency: int) -> tuple[float, float, list[Turn]]:
    """Wall seconds and this process's CPU seconds of the timed run, and its turns."""
    per_client = TURNS_PER_CLIENT
    models = [
        OpenAIModel(base_url=base_url, model="bench", retries=0) for _ in range(-(-concurrency // per_client))
    ]

    async def run(indexes) -> list[Turn]:
        turns: list[Turn] = [None] * len(indexes)  # type: ignore[list-item]
        pending = iter(enumerate(indexes))

        async def work(model: OpenAIModel) -> None:
            for slot, i in pending:
                turns[slot] = await model.complete(_prompt(i))

        await asyncio.gather(*(work(models[w % len(models)]) for w in range(concurrency)))
        return turns

    try:
        # One untimed round opens the pools' connections, as a long run would have them open.
        await run(range(concurrency))
        started, cpu_started = time.perf_counter(), time.process_time()
        turns = await run(range(records))
        return time.perf_counter() - started, time.process_time() - cpu_started, turns
    finally:
        for model in models:
            await model.aclose()


def measure(
    records: int = 1000, concurrency: int = 32, latency_s: float = 0.2, *, scripted_server: bool = False
) -> dict[str, object]:
    """Run the benchmark; the numbers it prints."""
    serve = serve_openai_process if scripted_server else serve_latency_process
    with serve(Reply(latency_s=latency_s)) as base_url:
        wall_s, cpu_s, turns = asyncio.run(_run_turns(base_url, records, concurrency))
    ideal_s = records * latency_s / concurrency
    latencies = [t.latency_ms for t in turns if t.latency_ms is not None]
    return {
        "records": records,
        "concurrency": concurrency,
        "server": "scripted" if scripted_server else "latency",
        "turns_per_client": TURNS_PER_CLIENT,
        "latency_s": latency_s,
        "wall_s": round(wall_s, 3),
        "ideal_s": round(ideal_s, 3),
        "ratio": round(wall_s / ideal_s, 3) if ideal_s else None,
        "client_cpu_s": round(cpu_s, 3),
        "client_cpu_ms_per_turn": round(cpu_s * 1000.0 / records, 3) if records else None,
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
    parser.add_argument("--scripted-server", action="store_true", help="use the Starlette test server")
    args = parser.parse_args(argv)
    result = measure(args.records, args.concurrency, args.latency_ms / 1000.0, scripted_server=args.scripted_server)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
