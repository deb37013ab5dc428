"""A run of several variants end to end (docpilot/run/variants.py, `docpilot eval --variant/--models`).

Real processes against real OpenAI-compatible servers on 127.0.0.1 (``tests.support.latency_server``,
which counts the completions it answers): bad input stops before any turn, retrieval runs once
for variants that share it, the variants' turns are in flight at once, a re-run sends no turn,
and a variant added to the config sends its own records' turns only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from benchmarks.harness import make_golden, server_stats
from tests.conftest import ROOT
from tests.support.latency_server import serve_latency_process
from tests.support.openai_server import Reply

pytestmark = pytest.mark.slow

RECORDS = 6


def _env() -> dict[str, str]:
    """This test's environment (its own cache and reports folders), with the project importable."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _eval(tmp_path: Path, *args: str, out: str = "report.json") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "docpilot", "eval", "--orchestrator", "inline",
                           "--out", str(tmp_path / out), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=_env())


def _config(tmp_path: Path, golden: Path, urls: list[str], *, extra: str = "") -> Path:
    lines = [f"golden: {golden}", "model:", "  provider: openai", "  name: bench", "  concurrency: 2", "variants:"]
    for index, url in enumerate(urls):
        lines += [f"  m{index + 1}:", f"    model.base_url: {url}"]
    path = tmp_path / "docpilot.yaml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@pytest.fixture
def servers():
    with ExitStack() as stack:
        yield [stack.enter_context(serve_latency_process(Reply(latency_s=0.3))) for _ in range(3)]


@pytest.fixture
def golden(tmp_path) -> Path:
    path = tmp_path / "golden.yaml"
    make_golden(path, RECORDS)
    return path


def test_bad_variants_are_refused_before_any_model_call(tmp_path, servers, golden):
    url = servers[0]
    common = ["--golden", str(golden), "--provider", "openai", "--model", "bench", "--base-url", url]
    cases = {
        "named twice": (["--variant", "a", "--variant", "a=prime.top_k=3"], "variant 'a' is named twice"),
        "unknown key": (["--variant", "a=prime.topk=3"], "unknown key 'prime.topk' in a variant"),
        "the golden set": (["--variant", "a", "--variant", "b=golden=x.yaml"], "may not change 'golden'"),
        "the docs": (["--variant", "a", "--variant", "b=corpus.docs=x"], "may not change 'corpus.docs'"),
        "a bad value": (["--variant", "a", "--variant", "b=prime.top_k=0"], "variant 'b': prime.top_k"),
        "a model twice": (["--models", "extractive,extractive"], "variant 'extractive' is named twice"),
        "no such gate variant": (["--models", "extractive,openai", "--gate-variant", "c"], "--gate-variant c"),
        "prefect": (["--models", "extractive,openai", "--orchestrator", "prefect"], "several variants run in this process"),
    }
    for name, (args, said) in cases.items():
        result = _eval(tmp_path, *common, *args)
        assert result.returncode == 2, (name, result.stderr)
        assert said in result.stderr and "Traceback" not in result.stderr, (name, result.stderr)
        assert not (tmp_path / "report.json").exists(), name
    assert server_stats(url)["requests"] == 0  # not even the endpoint's probe


def test_variants_share_retrieval_answer_at_once_and_a_rerun_sends_no_turn(tmp_path, servers, golden):
    config = _config(tmp_path, golden, servers)
    result = _eval(tmp_path, "--config", str(config))
    assert result.returncode in (0, 1), result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema_version"] == 2 and [v["name"] for v in report["variants"]] == ["m1", "m2", "m3"]
    assert [r["variant"] for r in report["rows"]] == ["m1"] * RECORDS + ["m2"] * RECORDS + ["m3"] * RECORDS
    # Retrieval ran once, for the first variant; the others found its rankings stored.
    assert [v["cache_stats"]["retrieve"] for v in report["variants"]] == [
        {"reused": 0, "computed": RECORDS}, {"reused": RECORDS, "computed": 0}, {"reused": RECORDS, "computed": 0}]
    stats = [server_stats(url) for url in servers]
    assert [s["requests"] for s in stats] == [RECORDS] * 3  # its turns, and no probe
    # The three endpoints were busy at the same time: each got its first request before any
    # of them answered its last (one after another, each would start when the last ended).
    assert max(s["first_request_at"] for s in stats) < min(s["last_reply_at"] for s in stats)
    assert "m1" in result.stdout and "paired against m1" in result.stdout

    again = _eval(tmp_path, "--config", str(config), out="again.json")
    assert again.returncode == report_code(report), again.stderr
    rerun = json.loads((tmp_path / "again.json").read_text())
    assert all(v["cache_stats"]["model"] == {"reused": RECORDS, "computed": 0} for v in rerun["variants"])
    assert [server_stats(url)["requests"] for url in servers] == [RECORDS] * 3  # no turn

    added = _config(tmp_path, golden, servers, extra=f"  m4:\n    model.base_url: {servers[0]}\n"
                                                      "    model.max_tokens: 99\n")
    grown = _eval(tmp_path, "--config", str(added), out="grown.json")
    assert grown.returncode in (0, 1), grown.stderr
    grown_report = json.loads((tmp_path / "grown.json").read_text())
    computed = {v["name"]: v["cache_stats"]["model"]["computed"] for v in grown_report["variants"]}
    assert computed == {"m1": 0, "m2": 0, "m3": 0, "m4": RECORDS}
    assert [r["variant"] for r in grown_report["rows"]] == [m for m in ("m1", "m2", "m3", "m4") for _ in range(RECORDS)]
    # m4 shares m1's server: its probe and its turns; the others send nothing.
    assert [server_stats(url)["requests"] for url in servers] == [2 * RECORDS, RECORDS, RECORDS]


def report_code(report: dict) -> int:
    return 0 if report["verdict"] == "pass" else 1


def test_a_gate_failing_in_one_variant_fails_the_run_unless_the_verdict_reads_another(tmp_path):
    config = tmp_path / "docpilot.yaml"
    config.write_text('gates:\n  over_refusal_gate: "<= 0.5"\n')
    args = ["--config", str(config), "--split", "dev", "--limit", "8",
            "--variant", "base", "--variant", "strict=guard.mode=on,guard.threshold=1000"]
    failed = _eval(tmp_path, *args)
    assert failed.returncode == 1, failed.stderr
    assert "FAIL  strict: over_refusal_gate <= 0.5" in failed.stdout and "verdict: fail" in failed.stdout
    passed = _eval(tmp_path, *args, "--gate-variant", "base", "--json", out="gated.json")
    assert passed.returncode == 0, passed.stderr
    payload = json.loads(passed.stdout)
    assert payload["verdict"] == "pass" and payload["variants"]["strict"]["verdict"] == "fail"
    assert payload["paired"]["gate_variant"] == "base"
    # `docpilot score` recomputes both variants and the verdict from the rows alone.
    scored = subprocess.run([sys.executable, "-m", "docpilot", "score", str(tmp_path / "report.json"), "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert scored.returncode == 1, scored.stderr
    assert json.loads(scored.stdout)["variants"]["strict"]["verdict"] == "fail"


def test_variants_on_one_endpoint_split_its_concurrency_and_others_keep_their_own():
    from docpilot.config.model import Config
    from docpilot.config.variants import resolve
    from docpilot.run.job import EvalJob
    from docpilot.run.variants import variant_jobs

    base = Config.model_validate({"model": {"provider": "openai", "name": "m", "concurrency": 5,
                                            "base_url": "http://127.0.0.1:1/v1"}})
    variants = resolve(base, [("a", {}), ("b", {"model.max_tokens": 9}), ("c", {"model.base_url": "http://h:2/v1"}),
                              ("d", {"model.provider": "extractive"})])
    jobs = variant_jobs(EvalJob(config=base, golden="g.yaml"), variants)
    assert [j.config.model.concurrency for j in jobs] == [3, 2, 5, 5]
    assert [j.variant for j in jobs] == ["a", "b", "c", "d"] and len({j.run_key for j in jobs}) == 4


@contextmanager
def _two_variants_under_way(tmp_path: Path, requests: int) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """A 20-record eval of variants `a` and `b`, each on its own server, once each server saw ``requests``
    requests; the running command and its arguments (for a re-run)."""
    golden = tmp_path / "golden.yaml"
    make_golden(golden, 20)
    with serve_latency_process(Reply(latency_s=0.3)) as a, serve_latency_process(Reply(latency_s=0.3)) as b:
        args = [sys.executable, "-m", "docpilot", "eval", "--golden", str(golden), "--provider", "openai",
                "--model", "bench", "--concurrency", "2", "--orchestrator", "inline", "--out", str(tmp_path / "r.json"),
                "--variant", f"a=model.base_url={a}", "--variant", f"b=model.base_url={b}"]
        running = subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while min(server_stats(a)["requests"], server_stats(b)["requests"]) < requests and time.monotonic() < deadline:
            time.sleep(0.1)
        yield running, args


def test_ctrl_c_stops_every_variant_at_once_and_a_rerun_resumes_them(tmp_path):
    # The probe, then 5 turns at 2 in flight: the 5th goes out once 3 are answered.
    with _two_variants_under_way(tmp_path, requests=6) as (running, args):
        running.send_signal(signal.SIGINT)
        _, err = running.communicate(timeout=60)
        assert running.returncode == 130, err
        assert "interrupted:" in err and "Traceback" not in err
        assert not (tmp_path / "r.json").exists()
        again = subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert again.returncode in (0, 1), again.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    for variant in report["variants"]:  # each variant's answered turns were stored, and reused
        assert variant["cache_stats"]["model"]["reused"] >= 3, variant["name"]


def test_a_variant_whose_endpoint_is_down_fails_the_run_with_its_own_message(tmp_path, golden):
    with serve_latency_process(Reply(latency_s=0.3)) as a:
        done = _eval(tmp_path, "--golden", str(golden), "--provider", "openai", "--model", "bench",
                     "--variant", f"up=model.base_url={a}", "--variant", "down=model.base_url=http://127.0.0.1:9/v1")
    assert done.returncode == 2, done.stderr
    assert "error: variant 'down': cannot connect to the model endpoint http://127.0.0.1:9/v1" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "report.json").exists()


def test_each_variant_of_a_run_gives_the_rows_it_gives_alone(tmp_path, golden):
    # The variants travel the road side by side, sharing the docs, the index and the
    # rankings; each one's rows are those of a run of its configuration alone.
    from docpilot.config.model import Config
    from docpilot.config.variants import resolve
    from docpilot.run.evaluation import evaluate
    from docpilot.run.job import build_job

    def config(cache: str) -> Config:
        return Config.model_validate({"golden": str(golden), "cache_dir": str(tmp_path / cache),
                                      "reports_dir": str(tmp_path / "reports"), "model": {"provider": "extractive"}})

    def rows(report, variant=None) -> list[tuple]:
        return [(r.id, r.answer, r.retrieved, r.citations) for r in report.rows if r.variant == variant]

    together = config("together")
    variants = resolve(together, [("k5", {}), ("k2", {"prime.top_k": 2})])
    joined = evaluate(build_job(together, out=str(tmp_path / "joined.json")), variants=variants)
    assert joined.path == str(tmp_path / "joined.json") and [v.name for v in joined.variants] == ["k5", "k2"]
    for variant in variants:
        alone = evaluate(build_job(variant.config.model_copy(update={"cache_dir": str(tmp_path / variant.name)}),
                                   out=str(tmp_path / f"{variant.name}.json")))
        assert rows(joined, variant.name) == rows(alone), variant.name
