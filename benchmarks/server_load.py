"""The server under load and under attack: throughput over concurrency, tail latency, half-open floods, one slot.

Starts `docpilot serve` as its own process on a free loopback port (extractive model,
the demo docs, default workers: one per core) and measures the four figures the
server is held to, printing them as a table and then as one JSON object:

1. requests/s of ``POST /v1/ask`` (JSON replies) at 32 concurrent clients divided by
   requests/s at 1 client, both in the same run against the same server;
2. the p99 latency, and the errors, of 200 clients sending for 8 s;
3. how long 1,500 connections that send half a request line stay open, and the
   slowest ``GET /healthz`` answered while they do;
4. the share of 503s a sequential keep-alive client gets from a server with one slot.

Load comes from ``hey`` (Debian package ``hey``): a Python client on the same two
cores would measure itself. Everything stays on 127.0.0.1.

    .venv/bin/python -m benchmarks.server_load
    .venv/bin/python -m benchmarks.server_load --seconds 8 --half-open 1500
    .venv/bin/python -m benchmarks.server_load --retriever hybrid   # MiniLM embeds each question

With ``--retriever hybrid`` each question runs MiniLM's matrix products, which is where
the workers' share of the BLAS threads shows; ``OPENBLAS_NUM_THREADS=2`` in the
environment keeps a thread per core in every worker instead, for comparison.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

if not __package__:  # run as a file: make the repository's packages importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from docpilot.metrics.latency import percentile  # noqa: E402

from docpilot.config.loading import load_config  # noqa: E402
from docpilot.server.process import local_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps({"question": "How do I install the package?", "stream": False})


def hey(url: str, clients: int, seconds: float) -> dict:
    """One ``hey`` run against /v1/ask: requests/s, latency percentiles (ms) and non-200 answers."""
    command = [
        "hey", "-z", f"{seconds}s", "-c", str(clients), "-m", "POST", "-T", "application/json",
        "-d", BODY, "-o", "csv", f"{url}/v1/ask",
    ]  # fmt: skip
    started = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - started
    rows = list(csv.DictReader(io.StringIO(out)))
    latency = [float(row["response-time"]) * 1000 for row in rows]
    codes = [row["status-code"] for row in rows]
    span = max((float(r["offset"]) + float(r["response-time"]) for r in rows), default=wall)
    return {
        "clients": clients,
        "requests": len(rows),
        "rps": round(len(rows) / span, 1) if span else None,
        "p50_ms": round(percentile(latency, 50) or 0, 2),
        "p99_ms": round(percentile(latency, 99) or 0, 2),
        "max_ms": round(max(latency, default=0), 2),
        "errors": sum(code != "200" for code in codes),
        "busy_503": codes.count("503"),
    }


def half_open(url: str, count: int, limit_s: float = 30.0) -> dict:
    """Open ``count`` connections that send half a request line; time until the server has closed them all."""
    parts = urlsplit(url)
    address = (parts.hostname, parts.port)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(address)
        sock.sendall(b"POST /v1/ask HT")
        sock.setblocking(False)
        sockets.append(sock)
    started = time.monotonic()
    slowest_healthz = 0.0
    healthz_failures = 0
    open_ = set(range(count))
    with httpx.Client(timeout=5.0) as client:
        while open_ and time.monotonic() - started < limit_s:
            mark = time.perf_counter()
            try:
                client.get(f"{url}/healthz", headers={"Connection": "close"}).raise_for_status()
            except httpx.HTTPError:
                healthz_failures += 1
            slowest_healthz = max(slowest_healthz, time.perf_counter() - mark)
            for i in list(open_):
                try:
                    if sockets[i].recv(4096) == b"":
                        open_.discard(i)
                except BlockingIOError:
                    continue
                except OSError:
                    open_.discard(i)
            time.sleep(0.2)
    closed_after = time.monotonic() - started
    for sock in sockets:
        sock.close()
    return {
        "connections": count,
        "still_open": len(open_),
        "all_closed_after_s": round(closed_after, 2) if not open_ else None,
        "slowest_healthz_ms": round(slowest_healthz * 1000, 2),
        "healthz_failures": healthz_failures,
    }


def sequential(url: str, requests: int) -> dict:
    """One keep-alive client asking ``requests`` streamed questions one after another."""
    codes = []
    with httpx.Client(timeout=30.0) as client:
        for _ in range(requests):
            with client.stream("POST", f"{url}/v1/ask", json={"question": "How do I install the package?"}) as r:
                r.read()
                codes.append(r.status_code)
    return {"requests": requests, "busy_503": codes.count(503), "share_503": round(codes.count(503) / requests, 4)}


def measure(seconds: float, tail_seconds: float, connections: int, sequential_requests: int,
            retriever: str | None = None) -> dict:
    if shutil.which("hey") is None:
        raise SystemExit("this benchmark needs `hey`: apt-get install -y hey")
    os.chdir(ROOT)  # the demo config names docs/ and evals/ relative to the checkout
    config = load_config(overrides={"retrieval": {"retriever": retriever}} if retriever else None)
    with local_server(config) as url:
        one = hey(url, 1, seconds)
        many = hey(url, 32, seconds)
        tail = hey(url, 200, tail_seconds)
        flood = half_open(url, connections)
    with local_server(config, max_concurrency=1) as url:
        polite = sequential(url, sequential_requests)
    return {
        "cores": os.cpu_count(),
        "retriever": config.retrieval.retriever,
        "blas_threads_from_env": os.environ.get("OPENBLAS_NUM_THREADS"),
        "throughput": {"c1": one, "c32": many, "ratio": round(many["rps"] / one["rps"], 2)},
        "tail_200_clients": tail,
        "half_open": flood,
        "sequential_one_slot": polite,
    }


def table(result: dict) -> str:
    t, tail, flood, polite = (result[k] for k in ("throughput", "tail_200_clients", "half_open", "sequential_one_slot"))
    if flood["still_open"] == 0:
        closed = f"closed after {flood['all_closed_after_s']} s"
    else:
        closed = f"{flood['still_open']} still open"
    rows = [
        ("requests/s c32 / c1, /v1/ask JSON", f"{t['c32']['rps']} / {t['c1']['rps']} = {t['ratio']}", ">= 1.6"),
        (
            "p99 at 200 clients, 8 s",
            f"{tail['p99_ms'] / 1000:.3f} s (p50 {tail['p50_ms'] / 1000:.3f} s), {tail['errors']} errors",
            "<= 1 s, 0 errors",
        ),
        (
            f"{flood['connections']} half-open connections",
            f"{closed}; /healthz slowest {flood['slowest_healthz_ms']:.0f} ms, {flood['healthz_failures']} failed",
            "closed within 15 s; /healthz < 1 s",
        ),
        ("sequential keep-alive client, one slot", f"{polite['share_503'] * 100:.1f} % 503", "0 %"),
    ]
    lines = ["| figure | measured | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each throughput level")
    parser.add_argument("--tail-seconds", type=float, default=8.0, help="length of the 200-client run")
    parser.add_argument("--half-open", type=int, default=1500, help="half-open connections to open")
    parser.add_argument("--sequential", type=int, default=500, help="questions the one-slot client asks")
    parser.add_argument("--retriever", choices=["bm25", "dense", "hybrid"], help="the retriever to serve with")
    args = parser.parse_args()
    result = measure(args.seconds, args.tail_seconds, args.half_open, args.sequential, args.retriever)
    print(table(result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
