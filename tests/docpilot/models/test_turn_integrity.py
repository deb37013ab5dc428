"""A turn is an answer only when the service said it finished it (docpilot/models/wire.py).

Against the scripted OpenAI-compatible server on 127.0.0.1 (tests/support/openai_server.py).
"""

from __future__ import annotations

import pytest

from docpilot.models.base import Prompt, paints
from docpilot.models.openai import OpenAIModel
from docpilot.models.wire import PartialTurn
from tests.support.openai_server import OpenAIScript, Reply

pytestmark = pytest.mark.anyio

PROMPT = Prompt(question="How do I authenticate?", messages=[{"role": "user", "content": "How do I authenticate?"}])
ANSWER = "Send the token in the Authorization header [1]."


async def _turn(served: tuple[str, OpenAIScript], reply: Reply):
    base_url, script = served
    script.reset(reply)
    async with OpenAIModel(base_url=base_url, model="test-model", retries=0) as model:
        return await model.complete(PROMPT)


# Regression: llama.cpp's server ends a turn in flight with [DONE] and no finish_reason when
# the next request arrives; those turns were stored and scored as (nearly) empty answers.
async def test_a_stream_ended_without_finish_reason_is_an_error(served) -> None:
    turn = await _turn(served, Reply(answer=ANSWER, interrupt_after_words=3))
    assert turn.error is not None
    assert "no finish_reason" in turn.error and "--interrupt_requests False" in turn.error
    assert turn.finish_reason is None and not turn.refused and not turn.truncated


async def test_an_interrupted_turn_with_no_text_says_so(served) -> None:
    turn = await _turn(served, Reply(answer=ANSWER, interrupt_after_words=0))
    assert turn.error is not None and "with no answer text" in turn.error


async def test_a_finished_turn_is_an_answer(served) -> None:
    turn = await _turn(served, Reply(answer=ANSWER))
    assert turn.error is None and turn.answer == ANSWER
    assert turn.finish_reason == "stop" and not turn.truncated


async def test_an_answer_cut_at_max_tokens_is_kept_and_marked_truncated(served) -> None:
    turn = await _turn(served, Reply(answer=ANSWER, finish_reason="length"))
    assert turn.error is None and turn.answer == ANSWER
    assert turn.truncated and turn.finish_reason == "length"


@pytest.mark.parametrize("answer", ["", "  \n "], ids=["empty", "white-space"])
async def test_a_finished_turn_without_answer_text_is_an_error(served, answer: str) -> None:
    turn = await _turn(served, Reply(answer=answer))
    assert turn.error is not None and "no answer text and no refusal" in turn.error


async def test_reasoning_that_used_the_whole_budget_is_an_error_naming_max_tokens(served) -> None:
    turn = await _turn(served, Reply(answer="", reasoning="Thinking about the sources.", finish_reason="length"))
    assert turn.error is not None and "model.max_tokens" in turn.error
    assert turn.reasoning == "Thinking about the sources."


async def test_a_refusal_is_an_answer_without_answer_text(served) -> None:
    turn = await _turn(served, Reply(answer="REFUSE: not-answerable"))
    assert turn.error is None and turn.refused and turn.refusal_cause == "not-answerable"


async def test_a_json_completion_without_finish_reason_is_an_error(served) -> None:
    turn = await _turn(served, Reply(answer=ANSWER, stream=False, finish_reason=""))
    assert turn.error is not None and "no finish_reason" in turn.error


def test_white_space_before_the_answer_is_not_its_first_token() -> None:
    # The one first-token rule (models.base.paints): a line break shows the reader nothing.
    progress = PartialTurn()
    progress.take_message({"content": "\n\n"}, 5.0)
    progress.take_message({"content": "Send"}, 9.0)
    assert progress.first_token_ms == 9.0
    assert not paints("\n ") and not paints("") and paints(" a")
