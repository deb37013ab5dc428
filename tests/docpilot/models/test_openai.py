"""The openai model against a real local OpenAI-compatible server (tests/support/openai_server.py)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import json
import logging
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import aiohttp
import pytest

from docpilot.errors import ConfigError, ModelError
from docpilot.models.base import Prompt, Source
from docpilot.models.openai import OpenAIModel
from docpilot.net.keys import api_key_from_env
from docpilot.net.retry import parse_retry_after
from tests.support.openai_server import (
    OpenAIScript,
    Reply,
    serve_openai_process,
)

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
ANSWER = "Send the token in the Authorization header [1]."
REASONING = "Source 1 covers authentication; it names the header."
PROMPT = Prompt(
    question="How do I authenticate?",
    sources=[Source(n=1, section_id="guide/auth#tokens", title="Auth › Tokens", text="Send the token.")],
    messages=[
        {"role": "system", "content": "Answer from the sources."},
        {"role": "user", "content": "How do I authenticate?"},
    ],
)
PROMPT_WORDS = 8  # the server counts whitespace-separated words of the messages as tokens


@pytest.fixture
def script(served: tuple[str, OpenAIScript]) -> OpenAIScript:
    served[1].reset()
    return served[1]


@pytest.fixture
def base_url(served: tuple[str, OpenAIScript]) -> str:
    return served[0]


def _model(base_url: str, **options: object) -> OpenAIModel:
    settings: dict[str, object] = {"model": "test-model", "api_key": KEY, "backoff_base_s": 0.01}
    settings.update(options)
    return OpenAIModel(base_url=base_url, **settings)  # type: ignore[arg-type]


async def _complete(base_url: str, prompt: Prompt = PROMPT, **options: object):
    async with _model(base_url, **options) as model:
        return await model.complete(prompt)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_answer_and_reasoning_are_kept_apart(base_url: str, script: OpenAIScript, field: str) -> None:
    script.enqueue(Reply(answer=ANSWER, reasoning=REASONING, reasoning_field=field, first_token_delay_s=0.05))
    turn = await _complete(base_url)
    assert turn.error is None
    assert turn.answer == ANSWER
    assert turn.reasoning == REASONING
    assert not turn.refused and turn.refusal_cause is None
    assert turn.first_thought_ms is not None and turn.first_token_ms is not None and turn.latency_ms is not None
    assert turn.first_thought_ms < turn.first_token_ms <= turn.latency_ms


async def test_sse_comments_and_the_empty_role_delta_are_not_answer_text(base_url: str, script: OpenAIScript) -> None:
    # The role chunk carries content "" and arrives at once; the first token is the first real text.
    script.enqueue(Reply(answer=ANSWER, comment=True, first_token_delay_s=0.1))
    turn = await _complete(base_url)
    assert turn.error is None and turn.answer == ANSWER and turn.reasoning is None
    assert turn.first_token_ms is not None and turn.first_token_ms >= 100


async def test_request_follows_the_chat_completions_format(base_url: str, script: OpenAIScript) -> None:
    await _complete(base_url, temperature=0.2, max_tokens=64, seed=7)
    await _complete(base_url, seed=None)
    first, second = (r.body for r in script.history)
    assert first == {
        "model": "test-model",
        "messages": PROMPT.messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "max_tokens": 64,
        "seed": 7,
    }
    assert "seed" not in second
    assert script.history[0].headers["content-type"] == "application/json"


async def test_a_prompt_without_messages_still_asks_its_question(base_url: str, script: OpenAIScript) -> None:
    await _complete(base_url, Prompt(question="What is a chunk?"))
    assert script.history[0].body["messages"] == [{"role": "user", "content": "What is a chunk?"}]


async def test_slow_first_token_is_measured(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, first_token_delay_s=0.3))
    turn = await _complete(base_url)
    assert turn.error is None
    assert 300 <= turn.first_token_ms < 1000
    assert turn.latency_ms - turn.first_token_ms < 250  # the rest of the answer follows at once


async def test_usage_is_taken_from_the_final_chunk(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer="One two three four five.", reasoning="Six seven."))
    turn = await _complete(base_url)
    assert turn.usage == {"prompt_tokens": PROMPT_WORDS, "completion_tokens": 7, "total_tokens": PROMPT_WORDS + 7}


async def test_refusal_is_parsed(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer="REFUSE: not-answerable"))
    turn = await _complete(base_url)
    assert turn.error is None
    assert turn.refused and turn.refusal_cause == "not-answerable"


async def test_stream_cut_midway_is_an_error_with_partial_timings(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, pieces=6, disconnect_after=3))
    turn = await _complete(base_url)
    assert turn.error is not None and turn.error.startswith("stream ended before [DONE] after 3 chunks")
    assert turn.answer and ANSWER.startswith(turn.answer) and turn.answer != ANSWER
    assert turn.first_token_ms is not None and turn.latency_ms >= turn.first_token_ms
    assert not turn.refused
    assert len(script.history) == 1  # something streamed, so no retry


async def test_stream_closed_without_done_is_an_error(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, omit_done=True))
    turn = await _complete(base_url)
    assert turn.error is not None and turn.error.startswith("stream ended before [DONE]")
    assert turn.answer == ANSWER and turn.usage  # what arrived is kept


async def test_disconnect_before_any_chunk_is_retried(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(disconnect_after=0), Reply(answer=ANSWER))
    turn = await _complete(base_url)
    assert turn.error is None and turn.answer == ANSWER
    assert len(script.history) == 2


async def test_malformed_chunk_is_an_error_naming_the_line(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, malformed_after=1))
    turn = await _complete(base_url)
    assert turn.error is not None and turn.error.startswith("malformed JSON in stream chunk 2")
    assert '"content": "cut' in turn.error
    assert len(script.history) == 1


async def test_error_chunk_mid_stream_is_reported(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, error_after=2, error_message="generation failed: out of memory"))
    turn = await _complete(base_url)
    assert turn.error is not None and "out of memory" in turn.error
    assert len(script.history) == 1


async def test_rate_limit_waits_for_retry_after_then_succeeds(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply.failure(429, "slow down", retry_after="1"), Reply(answer=ANSWER))
    started = time.perf_counter()
    turn = await _complete(base_url)
    elapsed = time.perf_counter() - started
    assert turn.error is None and turn.answer == ANSWER
    assert elapsed >= 1.0
    assert turn.latency_ms >= 1000  # the wait is part of what the user waited
    assert len(script.history) == 2


async def test_server_error_then_success(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply.failure(500), Reply(answer=ANSWER))
    turn = await _complete(base_url)
    assert turn.error is None and turn.answer == ANSWER
    assert len(script.history) == 2


async def test_persistent_server_error_gives_up_after_the_retries(base_url: str, script: OpenAIScript) -> None:
    script.reset(default=Reply.failure(503, "overloaded"))
    turn = await _complete(base_url, retries=2)
    assert turn.error is not None
    assert "HTTP 503" in turn.error and "overloaded" in turn.error and "after 3 attempts" in turn.error
    assert "fix:" in turn.error
    assert len(script.history) == 3


async def test_retry_after_beyond_the_time_budget_gives_up_at_once(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply.failure(429, retry_after="30"))
    turn = await _complete(base_url, timeout_s=2)
    assert turn.error is not None and "HTTP 429" in turn.error and "timeout_s" in turn.error
    assert len(script.history) == 1  # no retry: waiting 30 s would overrun the 2 s budget


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "DOCPILOT_API_KEY"), (404, "/v1"), (400, "parameters")],
)
async def test_client_error_is_not_retried_and_says_how_to_fix(
    base_url: str, script: OpenAIScript, status: int, hint: str
) -> None:
    # Services echo the key they were sent; it must not reach the report.
    script.enqueue(Reply.failure(status, f"Incorrect API key provided: {KEY}."))
    turn = await _complete(base_url)
    assert turn.error is not None
    assert f"HTTP {status}" in turn.error and hint in turn.error
    assert KEY not in turn.error and "Incorrect API key" in turn.error
    assert len(script.history) == 1


async def test_non_streaming_reply_counts_first_token_at_latency(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, reasoning=REASONING, stream=False))
    turn = await _complete(base_url)
    assert turn.error is None
    assert turn.answer == ANSWER and turn.reasoning == REASONING
    assert turn.first_token_ms == turn.latency_ms
    assert turn.usage["prompt_tokens"] == PROMPT_WORDS


async def test_api_key_travels_only_in_the_authorization_header(base_url: str, script: OpenAIScript) -> None:
    async with _model(base_url) as model:
        assert KEY not in repr(model)
        await model.complete(PROMPT)
    received = script.history[0]
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(received.body)
    await _complete(base_url, api_key=None)
    assert "authorization" not in script.history[1].headers


async def test_unreachable_server_is_an_error_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    turn = await _complete(f"http://127.0.0.1:{port}/v1", retries=1)
    assert turn.error is not None
    assert "cannot get a reply" in turn.error and "after 2 attempts" in turn.error
    assert turn.first_token_ms is None


async def test_turn_timeout_keeps_what_arrived(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, reasoning=REASONING, first_token_delay_s=2))
    turn = await _complete(base_url, timeout_s=0.5)
    assert turn.error is not None and "timeout_s=0.5" in turn.error
    assert turn.reasoning == REASONING and turn.first_thought_ms is not None
    assert turn.first_token_ms is None
    assert 450 <= turn.latency_ms < 2000  # cut at the budget, before the server's first token at 2 s


async def test_turns_reuse_one_connection(base_url: str, script: OpenAIScript) -> None:
    # Regression: leaving the body unread after [DONE] made every turn open a new connection.
    async with _model(base_url) as model:
        for _ in range(3):
            assert (await model.complete(PROMPT)).error is None
    assert len({r.peer for r in script.history}) == 1


async def test_concurrent_turns_overlap(base_url: str, script: OpenAIScript) -> None:
    script.reset(default=Reply(answer=ANSWER, latency_s=0.2))
    gate = asyncio.Semaphore(10)
    async with aiohttp.ClientSession() as session:
        model = _model(base_url, session=session)

        async def one() -> object:
            async with gate:
                return await model.complete(PROMPT)

        turns = await asyncio.gather(*(one() for _ in range(20)))
    assert all(t.error is None and t.answer == ANSWER for t in turns)
    assert 1 < script.peak_in_flight <= 10  # the server held several turns at once, never more than allowed


async def test_server_in_its_own_process_answers_the_same() -> None:
    # The benchmark runs the server this way, so that its work does not slow the client.
    with serve_openai_process(Reply(answer=ANSWER, reasoning=REASONING)) as other:
        turn = await _complete(other)
    assert turn.error is None and (turn.answer, turn.reasoning) == (ANSWER, REASONING)


async def test_a_session_passed_in_stays_open(base_url: str, script: OpenAIScript) -> None:
    async with aiohttp.ClientSession() as session:
        async with _model(base_url, session=session) as model:
            assert (await model.complete(PROMPT)).error is None
        assert not session.closed
        async with _model(base_url, session=session) as again:
            assert (await again.complete(PROMPT)).error is None
    assert len({r.peer for r in script.history}) == 1  # the second model reused the session's connection


def test_a_model_serves_one_asyncio_run_after_another(
    base_url: str, script: OpenAIScript, caplog: pytest.LogCaptureFixture
) -> None:
    # A session belongs to the event loop it was made in; the second run must not reuse it.
    script.reset(default=Reply(answer=ANSWER))
    model = _model(base_url)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        first = asyncio.run(model.complete(PROMPT))
        second = asyncio.run(model.complete(PROMPT))
        asyncio.run(model.aclose())
        gc.collect()
    assert (first.error, second.error) == (None, None) and first.answer == second.answer == ANSWER
    assert len(script.history) == 2
    assert "Unclosed" not in caplog.text  # the first run's session was closed, not left behind


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIModel(base_url="localhost:8000", model="m")
    with pytest.raises(ConfigError, match="timeout_s"):
        OpenAIModel(base_url="http://localhost:8000/v1", model="m", timeout_s=0)


def test_api_key_comes_from_docpilot_then_openai_variable() -> None:
    assert api_key_from_env({"DOCPILOT_API_KEY": "a", "OPENAI_API_KEY": "b"}) == "a"
    assert api_key_from_env({"DOCPILOT_API_KEY": " ", "OPENAI_API_KEY": "b"}) == "b"
    assert api_key_from_env({}) is None


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3", now=now) == 3.0
    assert parse_retry_after("0.5", now=now) == 0.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:05 GMT", now=now) == 5.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:59:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


async def test_retry_after_http_date_in_the_past_retries_at_once(base_url: str, script: OpenAIScript) -> None:
    past = format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)
    script.enqueue(Reply.failure(429, "busy", retry_after=past), Reply(answer=ANSWER, stream=False))
    # A 2 s budget: the 5 s backoff, had it been used instead of the date's "now", would overrun it.
    turn = await _complete(base_url, backoff_base_s=5, timeout_s=2)
    assert turn.error is None and turn.answer == ANSWER
    assert len(script.history) == 2


def _sdk_stream(base_url: str) -> tuple[str, str, dict[str, int]]:
    """Answer, reasoning and usage as the official OpenAI SDK reads the server's stream."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="test-model",
        messages=PROMPT.messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    answer, reasoning, usage = [], [], {}
    for chunk in stream:
        for choice in chunk.choices:
            answer.append(choice.delta.content or "")
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
    client.close()
    return "".join(answer), "".join(reasoning), usage


async def test_official_sdk_reads_the_same_stream(base_url: str, script: OpenAIScript) -> None:
    reply = Reply(answer=ANSWER, reasoning=REASONING, comment=True, pieces=5)
    script.reset(default=reply)
    sdk = await asyncio.to_thread(_sdk_stream, base_url)
    ours = await _complete(base_url)
    assert ours.error is None
    assert sdk == (ours.answer, ours.reasoning, ours.usage)
    assert sdk[0] == ANSWER and sdk[1] == REASONING and sdk[2]["total_tokens"] > 0


def _sdk_completion(base_url: str) -> tuple[str, str, dict[str, int]]:
    """Answer, reasoning and usage as the official OpenAI SDK reads a whole completion."""
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        completion = client.chat.completions.create(model="test-model", messages=PROMPT.messages)
    message = completion.choices[0].message
    usage = completion.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
    return message.content or "", (message.model_extra or {}).get("reasoning_content") or "", usage


async def test_official_sdk_reads_the_same_completion(base_url: str, script: OpenAIScript) -> None:
    # A server that ignores "stream" sends both clients the same JSON completion.
    script.reset(default=Reply(answer=ANSWER, reasoning=REASONING, stream=False))
    sdk = await asyncio.to_thread(_sdk_completion, base_url)
    ours = await _complete(base_url)
    assert ours.error is None
    assert sdk == (ours.answer, ours.reasoning, ours.usage)
    assert sdk[0] == ANSWER and sdk[1] == REASONING


async def test_stream_yields_thoughts_then_tokens_as_they_arrive(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, reasoning=REASONING, pieces=4))
    async with _model(base_url) as model:
        pieces = [piece async for piece in model.stream(PROMPT)]
    kinds = [kind for kind, _ in pieces]
    assert kinds == sorted(kinds, key=lambda k: k != "thought") and "token" in kinds and len(pieces) > 2
    assert "".join(text for kind, text in pieces if kind == "thought") == REASONING
    assert "".join(text for kind, text in pieces if kind == "token") == ANSWER


async def test_stream_raises_after_the_pieces_of_a_cut_turn(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer=ANSWER, pieces=6, disconnect_after=3))
    received: list[str] = []
    async with _model(base_url) as model:
        with pytest.raises(ModelError, match="stream ended before"):
            async for _, text in model.stream(PROMPT):
                received.append(text)
    assert received and ANSWER.startswith("".join(received))


# Bodies the scripted server cannot send (odd line ends, lines cut between reads) come from
# a bare HTTP/1.1 server on a socket, which writes each piece of the body on its own.


class _BodyServer:
    """Answers every request on 127.0.0.1 with the same body, sent chunked in the given pieces."""

    def __init__(self, *pieces: bytes, content_type: str = "text/event-stream") -> None:
        self.pieces = pieces
        self.content_type = content_type
        self.requests: list[str] = []  # the head (request line and headers) of each request
        self._open: dict[asyncio.StreamWriter, asyncio.Task] = {}  # connections being served

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open[writer] = asyncio.current_task()  # type: ignore[assignment]
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while not writer.is_closing():
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                self.requests.append(head)
                length = re.search(r"(?im)^content-length: *(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
                writer.write(
                    f"HTTP/1.1 200 OK\r\ncontent-type: {self.content_type}\r\n"
                    "transfer-encoding: chunked\r\n\r\n".encode()
                )
                for piece in self.pieces:
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                    await asyncio.sleep(0.005)  # lets the client read each piece apart
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        writer.close()
        del self._open[writer]

    @contextlib.asynccontextmanager
    async def serve(self, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
        """Serve until the block ends; yields the base URL (``.../v1``)."""
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=ssl_context)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}/v1"
        finally:
            server.close()
            # Closing the connections a client left open lets their handlers end on their own;
            # a handler cancelled instead would be logged as a failed callback.
            handlers = list(self._open.values())
            for writer in list(self._open):
                writer.close()
            if handlers:
                await asyncio.wait(handlers, timeout=5)
            await server.wait_closed()


def _event(text: str, end: str = "\n\n", finish: str | None = "stop") -> str:
    # The last chunk of a turn carries its finish_reason, as vLLM's and OpenAI's often do.
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return "data: " + json.dumps(chunk, ensure_ascii=False) + end


async def test_chunks_on_consecutive_data_lines_are_each_read() -> None:
    # Some servers end each event with one newline, so SSE joins several chunks into one event.
    body = _event("Send the token ", "\n", None) + _event("in the header.", "\n") + "\n" + "data: [DONE]\n"
    async with _BodyServer(body.encode()).serve() as url:
        turn = await _complete(url)
    assert turn.error is None and turn.answer == "Send the token in the header."


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
async def test_every_sse_line_end_is_read(end: str) -> None:
    body = f": hello{end}" + _event("Send the token", end * 2, None) + _event(" in the header.", end * 2)
    async with _BodyServer(body.encode(), f"data: [DONE]{end}{end}".encode()).serve() as url:
        turn = await _complete(url)
    assert turn.error is None and turn.answer == "Send the token in the header."


async def test_line_ends_and_characters_cut_between_reads_are_joined() -> None:
    # One chunk written over two data lines: the "\r" and "\n" between them arrive in two
    # reads (taking them for two line ends would cut the event, and its JSON, in two), and
    # so do the two bytes of "é".
    head, tail = '{"choices": [{"index": 0,', '"delta": {"content": "Café ouvert."}, "finish_reason": "stop"}]}'
    body = f"data: {head}\r\ndata: {tail}\r\n\r\ndata: [DONE]\r\n\r\n".encode()
    crlf, accent = body.index(b"\r\n"), body.index("é".encode())
    pieces = [body[: crlf + 1], body[crlf + 1 : accent + 1], body[accent + 1 :]]
    async with _BodyServer(*pieces).serve() as url:
        turn = await _complete(url)
    assert turn.error is None and turn.answer == "Café ouvert."


async def test_a_line_longer_than_the_read_buffer_is_read() -> None:
    # aiohttp's readline refuses lines over 128 KiB; a long answer in one chunk is one long line.
    # Its 40,000 words fit the reply cap of 40,000 tokens.
    long_answer = "word " * 40_000
    line = _event(long_answer).encode()
    pieces = [line[i : i + 16_384] for i in range(0, len(line), 16_384)] + [b"data: [DONE]\n\n"]
    async with _BodyServer(*pieces).serve() as url:
        turn = await _complete(url, max_tokens=40_000)
    assert len(line) > 200_000
    assert turn.error is None and turn.answer == long_answer


async def test_http_proxy_from_the_environment_carries_the_request(
    base_url: str, script: OpenAIScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = _BodyServer(_event(ANSWER).encode(), b"data: [DONE]\n\n")
    async with proxy.serve() as proxy_url:
        proxy_address = proxy_url.removeprefix("http://").removesuffix("/v1")
        monkeypatch.setenv("HTTP_PROXY", f"http://user:secret@{proxy_address}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        turn = await _complete("http://model.invalid/v1")
        assert turn.error is None and turn.answer == ANSWER
        assert proxy.requests[0].startswith("POST http://model.invalid/v1/chat/completions HTTP/1.1")
        credentials = base64.b64encode(b"user:secret").decode()
        assert f"proxy-authorization: basic {credentials}".lower() in proxy.requests[0].lower()
        # NO_PROXY sends requests for its hosts straight to them.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = await _complete(base_url)
    assert direct.error is None and len(proxy.requests) == 1 and len(script.history) == 1


def test_a_proxy_the_client_cannot_speak_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ConfigError, match="socks5"):
        OpenAIModel(base_url="https://api.example.com/v1", model="m")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_https_trusts_the_certificates_named_by_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    async with _BodyServer(_event(ANSWER).encode(), b"data: [DONE]\n\n").serve(served) as url:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        untrusted = await _complete(url, retries=0)  # certifi's bundle does not know this certificate
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = await _complete(url)
    assert untrusted.error is not None and "certificate" in untrusted.error.lower()
    assert trusted.error is None and trusted.answer == ANSWER


def test_an_unreadable_ssl_cert_file_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigError, match="SSL_CERT_FILE"):
        OpenAIModel(base_url="https://api.example.com/v1", model="m")
