"""How long `docpilot field` takes over a large log, and how much memory it holds.

Writes a JSONL log of ``--turns`` turns (default 100,000) in an app's own shape, drawn
from the demo log's turns (``tests.support.field_log``: the golden set's questions with
their planted faults, and off-topic themes); ``--distinct`` of them (default a half) get
a question no other turn asks, so the retriever and the language detector work for them
rather than remember. Then scores it once, as the command does (the docs opened, every
turn written to a JSONL file) with ``--workers`` processes (1 unless set), and prints the
wall time, turns a second, the rankings computed, the CPU seconds spent by this process and the workers (the figure
that does not depend on what else the machine runs; the wall time does), the load
average before the run, and the peak resident memory of the largest process.

    python -m benchmarks.field_speed [--turns 100000] [--distinct 0.5] [--workers 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from docpilot.config.loading import load_config
from docpilot.field.run import score_log
from tests.conftest import ROOT
from tests.support.field_log import APP_MAPPING, PlantedTurn, make_turns, write_app_log


def write_log(path: Path, turns: int, distinct: float, seed: int = 11) -> Path:
    """A log of ``turns`` turns, written as drawn; a ``distinct`` share of them ask a question of their own."""
    rng = random.Random(seed)
    pool = make_turns()

    def drawn() -> Iterator[PlantedTurn]:
        for i in range(turns):
            turn = rng.choice(pool)
            copy = PlantedTurn(**{**turn.__dict__, "id": f"t{i:07d}", "conversation": f"c{i // 4:07d}"})
            if rng.random() < distinct:
                copy.question = f"{turn.question} (case {i}, {rng.choice(['prod', 'staging', 'ci', 'laptop'])})"
            yield copy

    return write_app_log(drawn(), path)


def _cpu() -> float:
    """CPU seconds, user and system, of this process and of its finished children (the workers)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--distinct", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory() as folder:
        log = write_log(Path(folder) / "log.jsonl", args.turns, args.distinct)
        config = load_config(overrides={"corpus": {"docs": str(ROOT / "docs")}, "cache_dir": f"{folder}/cache",
                                        "logs": {"app": APP_MAPPING}})
        started = time.perf_counter()
        cpu_before = _cpu()
        report = score_log(config, log, rows_out=Path(folder) / "turns.jsonl", workers=args.workers)
        wall = time.perf_counter() - started
        cpu = _cpu() - cpu_before
    peak_mb = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    result = {"turns": report["summary"]["turns"], "wall_s": round(wall, 2),
              "turns_per_s": round(report["summary"]["turns"] / wall),
              "cpu_s": round(cpu, 2), "load_before": load, "rankings": report["runtime"]["rankings"],
              "open_s": report["runtime"]["open_s"], "peak_rss_mb": round(peak_mb), "groups": len(report["gaps"]),
              "workers": args.workers}
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
