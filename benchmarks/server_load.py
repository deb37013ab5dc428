"""How many questions a `docpilot serve` process answers per second, and how long each waits, under load.

Starts `docpilot serve` as its own process on a free loopback port (extractive model,
the demo docs), then for each number of concurrent clients sends the demo golden set's
questions round and round from one ``httpx.AsyncClient`` with a connection per client,
reading every answer as a stream, as ``docpilot eval --runtime server`` does. Each level
stops after ``--requests`` questions or ``--seconds`` seconds, whichever comes first.

The main server admits as many questions as there are clients (``--max-concurrency``,
default 256), so nothing is turned away; a second pass sends the largest level to a
server with the default limit of 32 and no client retries, to show how many 503s a
full server gives instead of queueing.

    .venv/bin/python -m benchmarks.server_load
    .venv/bin/python -m benchmarks.server_load --clients 1 16 200 --requests 2000 --seconds 20

Prints one JSON object. Latencies are client-side, network included (nearest-rank
percentiles); `server_total_p50_ms` is the server's own time for the same turns, and
`healthz_rps` the rate of a trivial request at the same concurrency: the ceiling the
machine's HTTP stack sets before any question is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from docpilot.config.golden import load_golden  # noqa: E402
from docpilot.config.loading import load_config  # noqa: E402
from docpilot.run.remote import RemoteTurn, ask, local_server  # noqa: E402
from metrics.latency import percentile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


async def _level(url: str, questions: list[str], clients: int, requests: int, seconds: float, retries: int) -> dict:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(60.0)) as client:
        # One untimed round opens the connections, as a long-running client would have them.
        await asyncio.gather(*(ask(client, url, questions[i % len(questions)]) for i in range(clients)))
        turns: list[RemoteTurn] = []
        issued = 0
        started = time.perf_counter()
        deadline = started + seconds

        async def worker() -> None:
            nonlocal issued
            while issued < requests and time.perf_counter() < deadline:
                question = questions[issued % len(questions)]
                issued += 1
                turns.append(await ask(client, url, question, busy_retries=retries))

        await asyncio.gather(*(worker() for _ in range(clients)))
        wall_s = time.perf_counter() - started
        floor_rps = await _healthz_rate(client, url, clients, min(requests, 500))
    ok = [t for t in turns if t.error is None]
    latency = [t.latency_ms for t in ok if t.latency_ms is not None]
    first = [t.first_token_ms for t in ok if t.first_token_ms is not None and t.refusal is None]
    server = [t.timing.total_ms for t in ok if t.timing is not None]

    def ms(values: list[float], p: float) -> float | None:
        value = percentile(values, p)
        return None if value is None else round(value, 2)

    return {
        "clients": clients,
        "requests": len(turns),
        "wall_s": round(wall_s, 3),
        "rps": round(len(turns) / wall_s, 1) if wall_s else None,
        "errors": len(turns) - len(ok),
        "busy_503": sum(t.status == 503 for t in turns),
        "error_kinds": sorted({(t.error or "").split(";")[0][:120] for t in turns if t.error}),
        "latency_p50_ms": ms(latency, 50),
        "latency_p95_ms": ms(latency, 95),
        "first_token_p50_ms": ms(first, 50),
        "first_token_p95_ms": ms(first, 95),
        "server_total_p50_ms": ms(server, 50),
        "healthz_rps": floor_rps,
    }


async def _healthz_rate(client: httpx.AsyncClient, url: str, clients: int, count: int) -> float:
    """Requests per second of GET /healthz at the same concurrency: what the HTTP stack alone allows here."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            (await client.get(f"{url}/healthz")).raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return round(count / (time.perf_counter() - started), 1)


def measure(clients: list[int], requests: int, seconds: float, max_concurrency: int) -> dict:
    """Run every level against one server, then the largest level against a default-limited one."""
    os.chdir(ROOT)  # the demo config names docs/ and evals/ relative to the checkout
    config = load_config()
    questions = [record.question for record in load_golden(config.golden)]
    levels = []
    with local_server(config, max_concurrency=max_concurrency) as url:
        for n in clients:
            levels.append(asyncio.run(_level(url, questions, n, requests, seconds, retries=3)))
    with local_server(config, max_concurrency=32) as url:
        limited = asyncio.run(_level(url, questions, max(clients), requests, seconds, retries=0))
    return {
        "docs": config.corpus.docs,
        "questions": len(questions),
        "model": f"{config.model.provider}/{config.model.name}",
        "max_concurrency": max_concurrency,
        "levels": levels,
        "limited_to_32": limited,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 200], help="concurrent clients per level")
    parser.add_argument("--requests", type=int, default=2000, help="most questions per level")
    parser.add_argument("--seconds", type=float, default=20.0, help="longest time per level")
    parser.add_argument("--max-concurrency", type=int, default=256, help="the main server's limit")
    args = parser.parse_args()
    result = measure(args.clients, args.requests, args.seconds, args.max_concurrency)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
