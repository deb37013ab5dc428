"""A lead: a run's first turns sent before its orchestrator is up, then taken over by the run itself."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest

from docpilot.config.model import Config
from docpilot.errors import ConfigError
from docpilot.models.probe import Ready
from docpilot import progress
from docpilot.run.job import EvalJob
from docpilot.run.context import stop_all
from docpilot.run.lane import Interrupted
from docpilot.run.orchestrator import choose
from docpilot.run.wiring import leading, run_inline
from tests.conftest import DATA
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

PIPELINE = DATA / "pipeline"
TIMING_ROW_FIELDS = {"latency_ms", "first_token_ms", "first_thought_ms", "stages_ms"}


def _job(tmp_path, name: str, base_url: str, shard_size: int = 2) -> EvalJob:
    config = Config(
        corpus={"docs": str(PIPELINE / "docs")},
        golden=str(PIPELINE / "golden.yaml"),
        cache_dir=str(tmp_path / name / "cache"),
        reports_dir=str(tmp_path / name / "reports"),
        shard_size=shard_size,  # 2: a first round of 1, a shard of 2 in the lead; 3 more records after it
        model={"provider": "openai", "name": "scripted", "base_url": base_url, "concurrency": 1, "retries": 0},
    )
    return EvalJob(config=config, golden=config.golden, split="all")


def _rows(report):
    return [row.model_dump(exclude=TIMING_ROW_FIELDS) for row in report.rows]


REPLY = Reply(answer="Install Acme with pip install acme-cli [index#install].", latency_s=0.05)


@pytest.fixture()
def script():
    return OpenAIScript(default=REPLY)


def test_a_run_that_took_over_a_lead_gives_the_same_rows_and_asks_each_prompt_once(tmp_path, script):
    with serve_openai(script) as base_url:
        plain, _ = run_inline(_job(tmp_path, "plain", base_url), choose("inline"))
        asked_plain = len(script.history)
        script.reset(REPLY)
        job = _job(tmp_path, "lead", base_url)
        with leading(job):
            deadline = time.monotonic() + 10
            while not script.history and time.monotonic() < deadline:
                time.sleep(0.01)
            assert script.history, "the lead sent nothing before the run started"
            led, _ = run_inline(job, choose("inline"))
        asked_led = len(script.history)
    assert asked_led == asked_plain == 6
    assert _rows(led) == _rows(plain)
    timing = ("latency_", "first_token_", "first_thought_", "stage_")
    assert {k: v for k, v in led.summary.items() if not k.startswith(timing)} == {
        k: v for k, v in plain.summary.items() if not k.startswith(timing)}
    assert not any(row.cached for row in led.rows)  # computed in this run, not read from a cache


def test_a_lead_counts_each_record_once_in_the_progress(tmp_path, script):
    stream = io.StringIO()
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "progress", base_url)
        progress.install(progress.LineSink(stream))
        try:
            with leading(job):
                run_inline(job, choose("inline"))
        finally:
            progress.install(None)
    counts = {stage: [int(done) for done, total in re.findall(rf"^{stage}: (\d+)/(\d+) records$",
                                                                stream.getvalue(), re.M)]
              for stage in ("retrieve", "model")}
    assert counts["retrieve"][-1] == 6 and counts["model"][-1] == 6
    assert max(counts["retrieve"]) == 6 and max(counts["model"]) == 6


def test_a_lead_on_a_cached_run_sends_nothing(tmp_path, script):
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "cached", base_url)
        first, _ = run_inline(job, choose("inline"))
        script.reset(REPLY)
        with leading(job):
            again, _ = run_inline(job, choose("inline"))
    assert script.history == []
    assert all("model" in row.cached and "retrieve" in row.cached for row in again.rows if row.gold)
    assert _rows(again) != [] and [r.answer for r in again.rows] == [r.answer for r in first.rows]


def test_turns_the_lead_finished_before_the_run_began_are_not_asked_again(tmp_path, script):
    # As when Prefect takes longer to start than the model takes to answer the lead.
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "finished", base_url)
        with leading(job):
            deadline = time.monotonic() + 10
            while len(script.history) < 3 and time.monotonic() < deadline:  # the lead's 1 + 2 records
                time.sleep(0.01)
            time.sleep(0.2)  # answered and stored
            report, _ = run_inline(job, choose("inline"))
    assert len(script.history) == 6
    assert not any(row.cached for row in report.rows)


def test_a_run_asked_to_stop_ends_interrupted_before_its_report(tmp_path, script):
    # The signal handler marks the run as stopping and raises KeyboardInterrupt; should a
    # library the run passes through swallow that, the mark alone still ends the run.
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "stopped", base_url)

        def stop_once_asked() -> None:
            deadline = time.monotonic() + 10
            while not script.history and time.monotonic() < deadline:
                time.sleep(0.005)
            stop_all()

        stopper = threading.Thread(target=stop_once_asked)
        stopper.start()
        try:
            with pytest.raises(Interrupted):
                run_inline(job, choose("inline"))
        finally:
            stopper.join()
    assert not list((tmp_path / "stopped" / "reports").glob("*.json"))
    assert len(script.history) < 6  # the stages that started after the mark sent nothing


@pytest.mark.parametrize(("shard_size", "waits_when_cached"), [(10, False), (2, True)])
def test_the_endpoint_is_waited_for_only_by_a_run_that_may_call_it(tmp_path, script, shard_size, waits_when_cached):
    with serve_openai(script) as base_url:
        job = _job(tmp_path, f"ready-{shard_size}", base_url, shard_size=shard_size)
        asked: list[int] = []

        def ready():
            asked.append(len(script.history))
            return job.config

        with leading(job, Ready(ready)) as run_job:
            run_inline(run_job, choose("inline"))
        assert asked == [0]  # once, before the first turn went out
        asked.clear()
        with leading(job, Ready(ready)) as run_job:  # every turn stored now
            again, _ = run_inline(run_job, choose("inline"))
    # With shard_size 10 the lead holds all six records: nothing can call the model. With
    # 2 it holds three, and the probe, already sent, costs less than looking up the rest.
    assert asked == ([len(script.history)] if waits_when_cached else [])
    assert all("model" in row.cached for row in again.rows if row.gold)


def _never(reason: str) -> Ready:
    """An endpoint that would cost a server's start, and fails the test when it is asked for."""
    return Ready(lambda: pytest.fail(reason), costly=lambda: True)


def _down() -> Ready:
    """An endpoint that cannot serve the run, as the probe reports a refused connection."""

    def refuse():
        raise ConfigError("cannot connect to the model endpoint", hint="start the server")

    return Ready(refuse)


def test_a_cached_run_starts_no_server_counts_each_record_once_and_keeps_its_rows(tmp_path, script):
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "cached-long", base_url)  # a lead of three records, three more after it
        first, _ = run_inline(job, choose("inline"))
        script.reset(REPLY)
        job = _job(tmp_path, "cached-long", base_url)  # the next run: the same settings, a run of its own
        stream = io.StringIO()
        progress.install(progress.LineSink(stream))
        try:
            with leading(job, _never("a run with every turn stored started the server")) as run_job:
                again, _ = run_inline(run_job, choose("inline"))
        finally:
            progress.install(None)
    assert script.history == []
    lines = stream.getvalue().splitlines()
    assert lines.count("retrieve: 6/6 records") == 1 and lines.count("model: 6/6 records") == 1
    assert not any(re.match(r"\w+: ([7-9]|\d\d+)/6", line) for line in lines)  # nothing counted twice

    def uncached(report):
        return [{key: value for key, value in row.items() if key != "cached"} for row in _rows(report)]

    assert uncached(again) == uncached(first)
    assert all("model" in row.cached and "retrieve" in row.cached for row in again.rows if row.gold)


def test_a_cached_run_goes_on_when_the_endpoint_is_down_and_only_then(tmp_path, script):
    with serve_openai(script) as base_url:
        job = _job(tmp_path, "down", base_url)
        first, _ = run_inline(job, choose("inline"))
        with leading(job, _down()) as run_job:  # every turn stored: the run needs no endpoint
            again, _ = run_inline(run_job, choose("inline"))
        assert [row.answer for row in again.rows] == [row.answer for row in first.rows]
        refreshed = job.model_copy(update={"refresh": ["model"]})  # every turn to ask again
        with pytest.raises(ConfigError, match="cannot connect"), leading(refreshed, _down()):
            pytest.fail("a run with turns to send went on without its endpoint")


@pytest.mark.parametrize("missing", ["a turn", "a ranking"])
def test_a_cached_run_waits_for_the_endpoint_when_a_record_past_the_lead_has_work_left(tmp_path, script, missing):
    golden = tmp_path / "golden.yaml"
    golden.write_text((PIPELINE / "golden.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    with serve_openai(script) as base_url:
        job = _job(tmp_path, f"past-{missing}", base_url)  # a lead of the first three records
        config = job.config.model_copy(update={"golden": str(golden)})
        job = job.model_copy(update={"golden": str(golden), "config": config})
        if missing == "a turn":  # the fourth record's turn fails, and a failed turn is not stored
            script.by_content["How often should tokens be rotated?"] = Reply.failure(500)
        first, _ = run_inline(job, choose("inline"))
        if missing == "a ranking":  # a record added at the end since
            with golden.open("a", encoding="utf-8") as extra:
                extra.write("- id: added\n  question: How do I roll back a release?\n  gold: ['guide/deploy']\n"
                            "  split: dev\n")
        script.reset(REPLY)
        asked: list[int] = []

        def ready():
            asked.append(len(script.history))
            return job.config

        with leading(job, Ready(ready, costly=lambda: True)) as run_job:  # as the local server
            again, _ = run_inline(run_job, choose("inline"))
    assert asked == [0]  # the lead sent nothing, looked the rest up, and waited before the first turn
    assert len(script.history) == 1
    assert [row.error for row in again.rows] == [None] * len(again.rows)
    if missing == "a turn":
        assert any(row.error for row in first.rows)
