"""How close the eval harness runs to the physical limit, and what a re-run costs.

Generates a golden set of N questions about the demo docs, starts a local
OpenAI-compatible server in its own process that answers every call a fixed latency
after it arrived (``tests.support.latency_server``), and runs `docpilot eval` against it:

1. the whole command, cold cache, in a fresh process with the default flags (no Prefect
   API configured, so ``auto`` runs inline), as a user types it: its wall time from
   start to exit against the ideal N × latency / concurrency, beside the stages' own
   wall time from the report, when its first request (the first turn) arrived
   and how long it ran on after the last reply; the median of ``--commands`` (3) such
   commands, each listed;
2. with --prefect-server (start one for the run, with its services, as `prefect server
   start` runs) or --prefect-api URL: the same whole command with that API configured
   (``auto`` then runs under Prefect), ÷ the inline one, and the flow run and its task
   runs as the server recorded them;
3. in this process (imports done), the stages' wall time of a cold run against the
   ideal and against the physical limit ⌈N / concurrency⌉ × latency;
4. re-run with nothing changed, ``--repeat`` times: model calls (counted by the server)
   and the median wall time;
5. one record edited: model calls.

``cpu_check_ms`` times a fixed pure-Python loop before the first command and after the
last run (the best of five each): on a virtual machine the same loop can take twice as
long in one minute as in the next, and every figure above moves with it.

    python -m benchmarks.harness [--records 1000] [--latency 0.2] [--concurrency 32] [--repeat 5] [--commands 3]
                                 [--prefect-server | --prefect-api http://127.0.0.1:4200/api] [--json]
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

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.latency_server import serve_latency_process  # noqa: E402
from tests.support.openai_server import Reply  # noqa: E402


def cpu_check_ms(tries: int = 5) -> float:
    """The best of ``tries`` timings of a million additions in pure Python, in milliseconds."""
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def make_golden(path: Path, records: int, *, edit: int | None = None) -> None:
    """A golden set of generated questions about the demo docs' sections."""
    from docpilot.corpus.pages import load_corpus

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


def server_stats(base_url: str) -> dict:
    """Requests so far, the first since the last look and the last answer (``tests.support.latency_server``)."""
    return httpx.get(base_url.removesuffix("/v1") + "/stats").json()


def requests_seen(base_url: str) -> int:
    return server_stats(base_url)["requests"]


def run(golden: Path, cache: Path, base_url: str, concurrency: int, orchestrator: str) -> dict:
    """One `docpilot eval`, run in this process as a user runs it (imports already done).

    Returns the report's wall time of the stages, the command's time from reading the
    inputs to the written report, and how many rows reused the model stage.
    """
    from docpilot.cli import main as cli
    from docpilot.reports.report import load_report

    out = cache.parent / "report.json"
    args = ["eval", "--golden", str(golden), "--provider", "openai", "--model", "bench", "--base-url", base_url,
            "--concurrency", str(concurrency), "--orchestrator", orchestrator, "--out", str(out), "--json"]
    os.environ["DOCPILOT_CACHE_DIR"] = str(cache)
    if os.environ.get("SHARD"):
        os.environ["DOCPILOT_SHARD_SIZE"] = os.environ["SHARD"]
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        try:
            cli.main(args, standalone_mode=False)
        except SystemExit as exit_:
            if exit_.code not in (0, 1):  # 1 is a failed gate, still a finished run
                raise RuntimeError(f"docpilot eval exited with {exit_.code}") from None
    command = time.perf_counter() - started
    report = load_report(out)
    return {"wall_s": report.wall_ms / 1000, "command_s": command,
            "model_reused": sum("model" in r.cached for r in report.rows)}


def whole_command(golden: Path, cache: Path, base_url: str, concurrency: int, api: str | None) -> dict:
    """One `docpilot eval` with the default orchestrator, in a fresh process; its wall time from start to exit."""
    out = cache.parent / f"report-{cache.name}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(DOCPILOT_CACHE_DIR=str(cache), PREFECT_HOME=str(cache.parent / "prefect-home"))
    if api:
        env["PREFECT_API_URL"] = api
    args = [sys.executable, "-m", "docpilot", "eval", "--golden", str(golden), "--provider", "openai",
            "--model", "bench", "--base-url", base_url, "--concurrency", str(concurrency), "--out", str(out)]
    server_stats(base_url)  # from here on, the server notes this run's first request
    started, wall = time.perf_counter(), time.time()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    ended = wall + seconds
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"docpilot eval exited with {proc.returncode}:\n{proc.stderr}")
    report = json.loads(out.read_text())
    stats = server_stats(base_url)
    return {"command_s": seconds, "wall_s": report["wall_ms"] / 1000, "orchestrator": report["orchestrator"],
            # The first request is the first turn; the last reply is the last turn's.
            "first_request_s": stats["first_request_at"] - wall, "after_last_reply_s": ended - stats["last_reply_at"]}


def command_figures(command: dict) -> dict:
    """What ``whole_command`` measured, as reported: the orchestrator and the times, in seconds."""
    return {"orchestrator": command["orchestrator"], "command_s": round(command["command_s"], 3),
            "stages_wall_s": round(command["wall_s"], 3), "first_request_s": round(command["first_request_s"], 3),
            "after_last_reply_s": round(command["after_last_reply_s"], 3)}


@contextlib.contextmanager
def prefect_server(url: str | None, start: bool):
    """The API URL of the Prefect server to time against: the given one, one started for the run, or None."""
    if url or not start:
        yield url
        return
    from docpilot.tasks.prefect_server import start_prefect_server

    # With its services, as `prefect server start` runs: it records every task run.
    server = start_prefect_server(services=True)
    try:
        yield server.url
    finally:
        server.stop()


def recorded_run(api: str, expected_task_runs: int, timeout_s: float = 60.0) -> dict:
    """The latest flow run on the server: its state and its task runs by state, once all are recorded.

    The server turns the client's events into task runs after the client has exited;
    it is given ``timeout_s`` to record the ``expected_task_runs``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        [flow_run] = httpx.post(f"{api}/flow_runs/filter", json={"sort": "START_TIME_DESC", "limit": 1}).json()
        task_runs = httpx.post(f"{api}/task_runs/filter",
                               json={"flow_runs": {"id": {"any_": [flow_run["id"]]}}, "limit": 200}).json()
        if len(task_runs) >= expected_task_runs or time.monotonic() > deadline:
            states: dict[str, int] = {}
            for task_run in task_runs:
                states[task_run["state_type"]] = states.get(task_run["state_type"], 0) + 1
            return {"flow_run": flow_run["state_type"], "task_runs": len(task_runs), "task_run_states": states,
                    "expected_task_runs": expected_task_runs}
        time.sleep(0.5)


def expected_task_runs(records: int, concurrency: int) -> int:
    """Task runs of one eval: one per shard (every step of it inside), then the scorecard's."""
    from docpilot.config.model import Config
    from docpilot.run.job import shards

    return len(list(shards(range(records), Config().shard_size, first=concurrency))) + 1


def _arguments() -> argparse.Namespace:
    """The command line: records, latency and concurrency of the run timed, repeats, and the Prefect server to use."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5, help="unchanged re-runs, of which the median counts")
    parser.add_argument("--commands", type=int, default=3,
                        help="whole commands with the default flags, of which the median counts")
    parser.add_argument("--prefect-api", help="API URL of a running Prefect server, to time runs that report to it")
    parser.add_argument("--prefect-server", action="store_true", help="start a Prefect server to time runs against")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def main() -> None:
    args = _arguments()

    os.chdir(ROOT)
    # Byte-compiled first, as an installed package is: the first timed command must not
    # pay for compiling what the last edit touched.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "docpilot", "metrics", "tasks", "flows"], check=True)
    # Imported before anything is timed: start-up and imports are measured apart
    # (benchmarks/gate_only.py); here they would land in the first run only.
    import docpilot.cli.eval  # noqa: F401
    import docpilot.models.openai  # noqa: F401
    ideal = args.records * args.latency / args.concurrency
    limit = -(-args.records // args.concurrency) * args.latency
    speed_before = cpu_check_ms()
    out: dict = {"load_average": [round(x, 2) for x in os.getloadavg()],
                 "records": args.records, "latency_s": args.latency, "concurrency": args.concurrency,
                 "ideal_s": round(ideal, 3), "physical_limit_s": round(limit, 3)}
    with tempfile.TemporaryDirectory() as tmp, serve_latency_process(Reply(latency_s=args.latency)) as base_url:
        tmp = Path(tmp)
        golden = tmp / "golden.yaml"
        make_golden(golden, args.records)

        # The median of a few fresh-process commands, each with a cold cache: one command's
        # start-up alone varies by a tenth of a second on a virtual machine.
        commands = [whole_command(golden, tmp / f"cache-command-{i}", base_url, args.concurrency, None)
                    for i in range(args.commands)]
        command = sorted(commands, key=lambda c: c["command_s"])[len(commands) // 2]
        out["whole_command"] = {
            **command_figures(command),
            "ratio_to_ideal": round(command["command_s"] / ideal, 3),
            "stages_ratio_to_ideal": round(command["wall_s"] / ideal, 3),
            "runs_s": [round(c["command_s"], 3) for c in commands],
        }
        with prefect_server(args.prefect_api, args.prefect_server) as api:
            if api:
                expected = expected_task_runs(args.records, args.concurrency)
                # The server's first flow, which creates what later runs reuse.
                whole_command(golden, tmp / "cache-warm-api", base_url, args.concurrency, api)
                recorded_run(api, expected)  # the server idle again, as for a single run
                reported = whole_command(golden, tmp / "cache-api", base_url, args.concurrency, api)
                out["whole_command_with_prefect_api"] = {
                    **command_figures(reported),
                    "ratio_to_inline": round(reported["command_s"] / command["command_s"], 3),
                    # The run as the Prefect UI shows it: the flow run and every task run.
                    "recorded": recorded_run(api, expected),
                }

        before = requests_seen(base_url)
        cpu = time.process_time()
        first = run(golden, tmp / "cache", base_url, args.concurrency, "inline")
        cpu = time.process_time() - cpu
        out["first_run"] = {
            "wall_s": round(first["wall_s"], 3),
            "command_s": round(first["command_s"], 3),
            "model_calls": requests_seen(base_url) - before,
            "ratio_to_ideal": round(first["wall_s"] / ideal, 3),
            "ratio_to_physical_limit": round(first["wall_s"] / limit, 3),
            "command_ratio_to_ideal": round(first["command_s"] / ideal, 3),
            "client_cpu_s": round(cpu, 3),
        }

        before = requests_seen(base_url)
        reruns = [run(golden, tmp / "cache", base_url, args.concurrency, "inline") for _ in range(args.repeat)]
        wall = statistics.median(r["wall_s"] for r in reruns)
        command = statistics.median(r["command_s"] for r in reruns)
        out["rerun_unchanged"] = {
            "runs": args.repeat,
            "wall_s": round(wall, 3),
            "command_s": round(command, 3),
            "model_calls": requests_seen(base_url) - before,
            "rows_reused": min(r["model_reused"] for r in reruns),
            "share_of_first": round(wall / first["wall_s"], 4),
            "command_share_of_first": round(command / first["command_s"], 4),
        }

        make_golden(golden, args.records, edit=7)
        before = requests_seen(base_url)
        edited = run(golden, tmp / "cache", base_url, args.concurrency, "inline")
        out["one_record_edited"] = {"wall_s": round(edited["wall_s"], 3),
                                    "model_calls": requests_seen(base_url) - before}
    out["cpu_check_ms"] = {"before": speed_before, "after": cpu_check_ms()}


    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
