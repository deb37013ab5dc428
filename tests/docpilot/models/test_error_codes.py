"""Every fault a turn can end in carries an error code, against a real local OpenAI-compatible server."""

from __future__ import annotations

import socket

import pytest

from docpilot.errors import ModelError
from docpilot.models.base import Prompt, Reply, read_reply
from docpilot.models.openai import OpenAIModel
from tests.support.openai_server import OpenAIScript
from tests.support.openai_server import Reply as Scripted

pytestmark = pytest.mark.anyio

PROMPT = Prompt(question="How do I authenticate?", messages=[{"role": "user", "content": "How do I authenticate?"}])
ANSWER = "Send the token in the Authorization header [1]."


@pytest.fixture
def script(served: tuple[str, OpenAIScript]) -> OpenAIScript:
    served[1].reset()
    return served[1]


@pytest.fixture
def base_url(served: tuple[str, OpenAIScript]) -> str:
    return served[0]


async def _complete(base_url: str, **options: object):
    settings: dict[str, object] = {"model": "test-model", "backoff_base_s": 0.01, "retries": 0}
    settings.update(options)
    async with OpenAIModel(base_url=base_url, **settings) as model:  # type: ignore[arg-type]
        return await model.complete(PROMPT)


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Scripted.failure(401, "Incorrect API key"), "auth"),
        (Scripted.failure(403), "auth"),
        (Scripted.failure(404), "http_status"),
        (Scripted.failure(429), "rate_limit"),
        (Scripted.failure(503), "http_status"),
        (Scripted(answer=ANSWER, pieces=6, disconnect_after=3), "incomplete"),
        (Scripted(answer=ANSWER, omit_done=True), "incomplete"),
        (Scripted(answer=ANSWER, malformed_after=1), "malformed"),
        (Scripted(answer=ANSWER, error_after=2, error_message="out of memory"), "service_error"),
        (Scripted(answer=ANSWER, interrupt_after_words=3), "unfinished"),
        (Scripted(answer="   "), "empty"),
    ],
)
async def test_each_fault_of_the_service_has_its_code(
    base_url: str, script: OpenAIScript, reply: Scripted, code: str
) -> None:
    script.enqueue(reply)
    turn = await _complete(base_url)
    assert turn.error is not None and turn.error_code == code
    assert not turn.refused and not turn.truncated


async def test_a_turn_that_succeeds_has_no_code(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Scripted(answer=ANSWER))
    turn = await _complete(base_url)
    assert (turn.error, turn.error_code) == (None, None) and turn.answer == ANSWER


async def test_a_server_that_cannot_be_reached_is_connect() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    turn = await _complete(f"http://127.0.0.1:{port}/v1")
    assert turn.error_code == "connect" and "cannot get a reply" in (turn.error or "")


async def test_a_turn_past_its_budget_is_timeout(base_url: str, script: OpenAIScript) -> None:
    script.enqueue(Scripted(answer=ANSWER, first_token_delay_s=2))
    turn = await _complete(base_url, timeout_s=0.4)
    assert turn.error_code == "timeout" and "timeout_s=0.4" in (turn.error or "")


async def test_the_stream_raises_with_the_turns_code(base_url: str, script: OpenAIScript) -> None:
    # The server names a failed turn by this code (docpilot/server/turn.py), not by its message.
    script.enqueue(Scripted(answer=ANSWER, interrupt_after_words=2))
    async with OpenAIModel(base_url=base_url, model="test-model", retries=0) as model:
        with pytest.raises(ModelError) as raised:
            async for _ in model.stream(PROMPT):
                pass
    assert raised.value.code == "unfinished"


def test_a_reply_is_read_by_the_current_rules() -> None:
    assert read_reply(Reply(answer="Refuse: out-of-scope", finish_reason="stop")).refusal_cause == "out-of-scope"
    assert read_reply(Reply(answer=ANSWER, finish_reason="length")).truncated
    unfinished = read_reply(Reply(answer=ANSWER))
    assert unfinished.error_code == "unfinished" and not unfinished.refused
    empty = read_reply(Reply(answer="", finish_reason="length"))
    assert empty.error_code == "empty" and "max_tokens" in (empty.error or "")
