"""The load-measurement server says what the scripted server says, no sooner than its latency."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from docpilot.models.base import Prompt
from docpilot.models.openai import OpenAIModel
from tests.support.latency_server import serve_latency_process
from tests.support.openai_server import OpenAIScript, Reply, serve_openai

pytestmark = pytest.mark.slow

REPLY = Reply(answer="Set the token in the Authorization header [1].", reasoning="The token goes in a header.",
              latency_s=0.1)
BODY = {"model": "bench", "messages": [{"role": "user", "content": "Where does the token go?"}],
        "stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture(scope="module")
def latency_url():
    with serve_latency_process(REPLY) as base_url:
        yield base_url


def _events(base_url: str, body: dict) -> list:
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=10) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    return [event if event == "[DONE]" else _without_clock(json.loads(event)) for event in data]


def _without_clock(payload: dict) -> dict:
    return {key: value for key, value in payload.items() if key != "created"}


@pytest.mark.parametrize("usage", [True, False])
def test_the_stream_matches_the_scripted_servers_chunk_for_chunk(latency_url, usage):
    body = {**BODY, "stream_options": {"include_usage": usage}}
    with serve_openai(OpenAIScript(default=REPLY)) as scripted_url:
        expected = _events(scripted_url, body)
    assert _events(latency_url, body) == expected
    assert expected[-1] == "[DONE]" and len(expected) >= 6


def test_a_request_that_does_not_stream_gets_one_completion(latency_url):
    body = {**BODY, "stream": False}
    with serve_openai(OpenAIScript(default=REPLY)) as scripted_url:
        expected = httpx.post(f"{scripted_url}/chat/completions", json=body, timeout=10).json()
    got = httpx.post(f"{latency_url}/chat/completions", json=body, timeout=10).json()
    assert _without_clock(got) == _without_clock(expected)


def test_no_reply_comes_before_the_latency_and_stats_count_completions(latency_url):
    before = httpx.get(latency_url.removesuffix("/v1") + "/stats").json()["requests"]
    started = time.perf_counter()
    httpx.post(f"{latency_url}/chat/completions", json={**BODY, "stream": False}, timeout=10)
    assert time.perf_counter() - started >= REPLY.latency_s
    assert httpx.get(latency_url.removesuffix("/v1") + "/stats").json()["requests"] == before + 1


def test_the_model_client_reads_it_over_kept_alive_connections(latency_url):
    async def ask() -> list:
        async with OpenAIModel(base_url=latency_url, model="bench") as model:
            return [await model.complete(Prompt(question="Where does the token go?")) for _ in range(3)]

    turns = asyncio.run(ask())
    assert all(t.error is None and t.answer == REPLY.answer and t.reasoning == REPLY.reasoning for t in turns)
    assert all(t.latency_ms >= 100 and t.usage["total_tokens"] > 0 for t in turns)


def test_scripted_faults_are_left_to_the_scripted_server():
    with pytest.raises(ValueError, match="plain replies only"):
        with serve_latency_process(Reply(status=500)):
            pass
