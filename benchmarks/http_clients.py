"""What each HTTP client stack costs a run per question: aiohttp (the models') against httpx (DocPilot's server and
targets), on one event loop, under one limiter, as a run sends them.

Starts the latency server (``tests.support.latency_server``: every reply exactly ``--latency`` after its
request arrived) in its own process, then sends ``--requests`` streamed chat completions with each client,
``--concurrency`` in flight, alternately ``--rounds`` times, and reads each stream to its end. The ideal is
``requests × latency / concurrency``; what a client adds is its wall time over that, per request, and the
process's CPU seconds spent meanwhile.

    python -m benchmarks.http_clients [--requests 1000] [--latency 0.2] [--concurrency 32] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.latency_server import Reply, serve_latency_process  # noqa: E402

BODY = {"model": "bench", "messages": [{"role": "user", "content": "How do I clear the stage cache?"}],
        "stream": True}


async def _with_aiohttp(url: str, requests: int, concurrency: int) -> None:
    import aiohttp

    slots = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def one() -> None:
            async with slots, session.post(url, json=BODY) as response:
                async for _ in response.content:
                    pass

        await asyncio.gather(*(one() for _ in range(requests)))


async def _with_httpx(url: str, requests: int, concurrency: int) -> None:
    import httpx

    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:
        async def one() -> None:
            async with slots, client.stream("POST", url, json=BODY) as response:
                async for _ in response.aiter_lines():
                    pass

        await asyncio.gather(*(one() for _ in range(requests)))


def _timed(send, url: str, requests: int, concurrency: int) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    asyncio.run(send(url, requests, concurrency))
    return time.perf_counter() - started, time.process_time() - cpu


def measure(requests: int, latency_s: float, concurrency: int, rounds: int) -> dict:
    ideal = requests * latency_s / concurrency
    walls: dict[str, list[float]] = {"aiohttp": [], "httpx": []}
    cpus: dict[str, list[float]] = {"aiohttp": [], "httpx": []}
    with serve_latency_process(Reply(latency_s=latency_s)) as base_url:
        url = f"{base_url}/chat/completions"
        for send in (_with_aiohttp, _with_httpx):  # a warm-up of each, uncounted
            _timed(send, url, concurrency, concurrency)
        for _ in range(rounds):
            for name, send in (("aiohttp", _with_aiohttp), ("httpx", _with_httpx)):
                wall, cpu = _timed(send, url, requests, concurrency)
                walls[name].append(wall)
                cpus[name].append(cpu)
    figures = {"requests": requests, "latency_s": latency_s, "concurrency": concurrency, "ideal_s": round(ideal, 3)}
    for name in walls:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        figures[name] = {"wall_s": round(wall, 3), "over_ideal_ms_per_request": round((wall - ideal) * 1000 / requests, 3),
                         "cpu_ms_per_request": round(cpu * 1000 / requests, 3), "runs_s": [round(w, 3) for w in walls[name]]}
    figures["httpx_over_aiohttp_wall"] = round(figures["httpx"]["wall_s"] / figures["aiohttp"]["wall_s"], 3)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.requests, args.latency, args.concurrency, args.rounds)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name in ("aiohttp", "httpx"):
            f = figures[name]
            print(f"{name}: {f['wall_s']} s (ideal {figures['ideal_s']} s), {f['over_ideal_ms_per_request']} ms over "
                  f"the ideal and {f['cpu_ms_per_request']} ms of CPU per request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
