"""The model lane: one bounded stream of turns across a run's shards, stored as they finish, stoppable."""

from __future__ import annotations

import threading
import time

import pytest

from docpilot.assistant.workspace import open_workspace
from docpilot.config.model import Config
from docpilot.run import road
from docpilot.run.context import RunContext
from docpilot.run.job import shards
from docpilot.run.lane import Interrupted
from docpilot.run.road import (
    lookup_turns,
    prime_shard,
    start_traces,
)
from docpilot.schema import GoldenRecord
from tests.conftest import DATA
from tests.support.model_stage import model_shard, retrieve_shard, run_for
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

QUESTIONS = [
    "How can I roll back to the previous release?",
    "How do I install the command line tool?",
    "Which environment variable holds the token?",
    "How do I deploy to staging?",
]


def _records(count: int) -> list[GoldenRecord]:
    return [GoldenRecord(id=f"q{i}", question=f"{QUESTIONS[i % 4]} (case {i})", split="dev") for i in range(count)]


def _workspace(tmp_path, base_url: str, concurrency: int):
    config = Config(
        corpus={"docs": str(DATA / "pipeline" / "docs")},
        cache_dir=str(tmp_path / "cache"),
        model={"provider": "openai", "name": "scripted", "base_url": base_url, "concurrency": concurrency,
               "retries": 0},
    )
    return open_workspace(config)


def _primed(ws, records):
    return prime_shard(ws, retrieve_shard(ws, start_traces(records)))


def _in_threads(ws, batches, run: RunContext) -> list[BaseException]:
    """Run each batch's model stage on its own thread, as overlapping shards of one run do; the errors they raised."""
    errors: list[BaseException] = []

    def answer(traces):
        try:
            model_shard(ws, traces, run)
        except BaseException as error:  # noqa: BLE001 - collected for the test to look at
            errors.append(error)

    threads = [threading.Thread(target=answer, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


def test_overlapping_shards_share_one_bounded_lane(tmp_path):
    script = OpenAIScript(default=Reply(latency_s=0.05))
    with serve_openai(script) as base_url:
        ws = _workspace(tmp_path, base_url, concurrency=3)
        batches = [_primed(ws, shard) for shard in shards(_records(12), 4)]
        run = run_for(ws)
        try:
            assert _in_threads(ws, batches, run) == []
        finally:
            run.close()
    assert all(t.turn is not None and t.turn.error is None for batch in batches for t in batch)
    assert len(script.history) == 12
    # Never more than the configured turns at once, and the bound was used.
    assert script.peak_in_flight == 3
    # The three shards went through the same lane: its connections, never a fresh set per shard.
    assert len({request.peer for request in script.history}) <= 3


def test_every_answered_turn_is_stored_and_not_asked_again(tmp_path):
    script = OpenAIScript()
    with serve_openai(script) as base_url:
        ws = _workspace(tmp_path, base_url, concurrency=2)
        traces = _primed(ws, _records(5))
        model_shard(ws, traces)
        again = _primed(ws, _records(5))
        model_shard(ws, again)
    assert len(script.history) == 5
    assert all("model" in t.cached for t in again)
    assert [t.turn.answer for t in again] == [t.turn.answer for t in traces]


@pytest.mark.slow  # takes seconds
def test_an_interrupted_run_keeps_its_answered_turns_and_resumes(tmp_path, monkeypatch):
    # Storing a turn is slow here (a busy disk), so the turns answered before the interrupt
    # are still being written when it comes: closing the run, as a run does, waits for them.
    put_turn = road._put_turn

    def slow_put(ws, trace):
        time.sleep(0.2)
        put_turn(ws, trace)

    monkeypatch.setattr(road, "_put_turn", slow_put)
    script = OpenAIScript(default=Reply(latency_s=0.3))
    with serve_openai(script) as base_url:
        ws = _workspace(tmp_path, base_url, concurrency=1)
        traces = _primed(ws, _records(6))
        errors: list[BaseException] = []
        run = run_for(ws)
        worker = threading.Thread(target=lambda: errors.extend(_in_threads(ws, [traces], run)))
        worker.start()
        deadline = time.monotonic() + 10
        while len(script.history) < 3 and time.monotonic() < deadline:  # two answered, the third in flight
            time.sleep(0.01)
        stopped = time.monotonic()
        run.cancel()
        worker.join(timeout=10)
        assert time.monotonic() - stopped < 1.0, "the stage did not stop waiting when the run was interrupted"
        assert len(errors) == 1 and isinstance(errors[0], Interrupted)

        # A stage of that run that starts after the interruption does not send anything.
        with pytest.raises(Interrupted):
            model_shard(ws, _primed(ws, _records(6)), run)
        run.close()  # as a run does once it stops: every turn answered before the interrupt is stored

        resumed = _primed(ws, _records(6))  # the next run: a context of its own, nothing to reset
        answered = 6 - len(lookup_turns(ws, resumed))
        assert answered >= 2
        asked_before = len(script.history)
        model_shard(ws, resumed)
    assert len(script.history) - asked_before == 6 - answered
    assert all(t.turn is not None and t.turn.error is None for t in resumed)


def test_a_prompt_asked_again_in_a_run_is_sent_once(tmp_path):
    # Two records with one question get one prompt: the second asker waits for the turn
    # in flight, and a third, after it was answered, gets it at once.
    script = OpenAIScript(default=Reply(latency_s=0.2))
    twins = [GoldenRecord(id=f"twin{i}", question=QUESTIONS[0], split="dev") for i in range(3)]
    with serve_openai(script) as base_url:
        ws = _workspace(tmp_path, base_url, concurrency=4)
        first, second, third = (_primed(ws, [record]) for record in twins)
        assert first[0].prompt.messages == second[0].prompt.messages == third[0].prompt.messages
        run = run_for(ws)  # one lane for the three stages, as in a run
        try:
            assert _in_threads(ws, [first, second], run) == []
            run.assistant.send_turns(run, third)  # not looked up in the cache: the lane itself knows the answer
        finally:
            run.close()
    assert len(script.history) == 1
    assert first[0].turn is second[0].turn is third[0].turn and first[0].turn.error is None


def test_a_gap_between_shards_closes_no_connection_and_two_runs_keep_apart(tmp_path):
    script = OpenAIScript()
    with serve_openai(script) as base_url:
        ws = _workspace(tmp_path, base_url, concurrency=1)
        run = run_for(ws)
        try:
            for shard in shards(_records(6), 2):  # one after another, as a run's shards may come
                model_shard(ws, _primed(ws, shard), run)
        finally:
            run.close()
        assert len({request.peer for request in script.history}) == 1  # one connection, kept from shard to shard
        model_shard(ws, _primed(ws, _records(8)[6:]))  # another run: its own lane, its own connection
    assert len({request.peer for request in script.history}) == 2


def test_the_first_and_last_shards_can_be_one_round():
    items = list(range(10))
    assert list(shards(items, 4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # More than a shard after the first round: the last round is a shard of its own.
    assert list(shards(items, 4, first=2)) == [[0, 1], [2, 3, 4, 5], [6, 7], [8, 9]]
    assert list(shards(items[:6], 4, first=2)) == [[0, 1], [2, 3, 4, 5]]  # a round and a shard: no split
    assert list(shards(items[:7], 4, first=2)) == [[0, 1], [2, 3, 4], [5, 6]]
    assert list(shards(items, 4, first=8)) == list(shards(items, 4))
    assert list(shards(items[:3], 4, first=3)) == [[0, 1, 2]]
    assert [len(s) for s in shards(range(1000), 250, first=32)] == [32, 250, 250, 250, 186, 32]
    assert [x for s in shards(items, 4, first=2) for x in s] == items  # every item once, in order
