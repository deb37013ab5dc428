"""A reply is capped while it streams: whatever an endpoint sends, a turn holds a bounded amount.

Each test points the openai model at a real OpenAI-compatible server on 127.0.0.1 that
misbehaves the way a service ignoring ``max_tokens`` does, and reads the turn it ends with.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest

from docpilot.models.base import Prompt
from docpilot.models.openai import OpenAIModel
from docpilot.models.wire import CHARS_FLOOR, CHARS_PER_TOKEN, line_limit, reply_char_limit
from docpilot.net.sse import EventReader, LineTooLong
from tests.support.openai_server import OpenAIScript, Reply

pytestmark = pytest.mark.anyio

PROMPT = Prompt(question="How do I authenticate?")


@pytest.fixture
def script(served: tuple[str, OpenAIScript]) -> Iterator[OpenAIScript]:
    served[1].reset()
    yield served[1]
    served[1].reset()


@pytest.fixture
def base_url(served: tuple[str, OpenAIScript]) -> str:
    return served[0]


async def _complete(base_url: str, **options: object):
    settings: dict[str, object] = {"model": "test-model", "timeout_s": 20.0, **options}
    async with OpenAIModel(base_url=base_url, **settings) as model:  # type: ignore[arg-type]
        return await model.complete(PROMPT)


async def _settled(script: OpenAIScript, within_s: float = 5.0) -> int:
    """The requests still in flight on the server once it has had ``within_s`` to see the client leave."""
    deadline = time.monotonic() + within_s
    while script.in_flight and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return script.in_flight


def test_the_character_bound_is_sixteen_characters_a_token_and_a_floor() -> None:
    assert reply_char_limit(512) == 512 * CHARS_PER_TOKEN + CHARS_FLOOR == 24_576
    assert line_limit(reply_char_limit(512)) > 6 * reply_char_limit(512)  # room for \\uXXXX escapes


# Regression: one 10 MB delta with finish_reason stop was scored as a 10 MiB answer.
async def test_one_huge_delta_is_cut_before_it_is_held(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer="x" * 10_000_000, pieces=1, finish_reason="stop"))
    started = time.monotonic()
    turn = await _complete(base_url, max_tokens=512)
    assert time.monotonic() - started < 10
    assert turn.error_code == "reply_too_long"
    assert "max_tokens=512" in turn.error and "longer than" in turn.error
    assert turn.answer == ""  # the delta was refused, not kept and then cut
    assert await _settled(script) == 0  # the connection was closed, which ends the server's stream


# Regression: a stream without end grew until timeout_s (3.5 GB resident for one row).
async def test_an_endless_stream_is_cut_at_the_cap_and_its_connection_closed(
    base_url: str, script: OpenAIScript
) -> None:
    script.enqueue(Reply(answer="more words ", endless=True))
    started = time.monotonic()
    turn = await _complete(base_url, max_tokens=64)
    assert time.monotonic() - started < 10  # well inside timeout_s=20
    assert turn.error_code == "reply_too_long"
    assert "max_tokens=64" in turn.error and f"more than {reply_char_limit(64)} characters" in turn.error
    assert reply_char_limit(64) - len("more words ") < len(turn.answer) <= reply_char_limit(64)
    assert await _settled(script) == 0


async def test_reasoning_counts_towards_the_cap(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(reasoning="think " * 5_000, pieces=50, answer="Short answer [1]."))
    turn = await _complete(base_url, max_tokens=16)
    assert turn.error_code == "reply_too_long" and turn.answer == ""
    assert len(turn.reasoning or "") <= reply_char_limit(16)


async def test_usage_past_max_tokens_ends_the_turn_as_the_service_counts(
    base_url: str, script: OpenAIScript
) -> None:
    # Twelve words counted as twelve tokens, well inside the character bound.
    script.enqueue(Reply(answer="one two three four five six seven eight nine ten eleven twelve",
                         pieces=12, running_usage=True))
    turn = await _complete(base_url, max_tokens=5)
    assert turn.error_code == "reply_too_long"
    counted = re.search(r"the service counted (\d+) completion tokens", turn.error or "")
    assert counted is not None and int(counted.group(1)) > 5
    assert len(turn.answer.split()) < 12  # cut before the reply was whole
    assert await _settled(script) == 0


async def test_an_unstreamed_completion_past_the_cap_is_cut(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Reply(answer="y" * 2_000_000, stream=False))
    turn = await _complete(base_url, max_tokens=512)
    assert turn.error_code == "reply_too_long" and "JSON completion longer than" in turn.error
    assert turn.answer == ""


async def test_a_reply_inside_the_cap_is_an_answer(base_url: str, script: OpenAIScript) -> None:
    # Close to the bound, cut by the service at max_tokens: truncated, not an error.
    answer = "z" * (reply_char_limit(100) - 10)
    script.enqueue(Reply(answer=answer, pieces=40, finish_reason="length"))
    turn = await _complete(base_url, max_tokens=100)
    assert turn.error is None and turn.truncated and turn.answer == answer


def test_the_event_reader_refuses_a_line_once_it_holds_more_than_its_limit() -> None:
    reader = EventReader(max_line=1_000)
    assert reader.feed(b"data: " + b"a" * 900) == []  # part of a line, still inside the limit
    with pytest.raises(LineTooLong):
        reader.feed(b"a" * 200)  # the line passes 1,000 characters before it ends


def test_the_event_reader_refuses_an_event_of_many_data_lines_past_its_limit() -> None:
    reader = EventReader(max_line=1_000)
    with pytest.raises(LineTooLong):
        for _ in range(100):
            reader.feed(b"data: " + b"b" * 50 + b"\n")  # no blank line: one event that never ends


def test_lines_inside_the_limit_read_as_before() -> None:
    reader = EventReader(max_line=1_000)
    body = b'data: {"a": 1}\r\n\r\ndata: [DONE]\n\n'
    assert [e for piece in (body[:9], body[9:]) for e in reader.feed(piece)] == ['{"a": 1}', "[DONE]"]
