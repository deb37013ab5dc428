"""Follow-ups asked of a target, in each conversation mode, against a real assistant on 127.0.0.1.

The assistant (``tests.support.recording_assistant``) records every request body and keeps
threads, so each test reads what a follow-up actually carried: its earlier turns
(``{history}``, ``{messages}``) or the thread id the turn before it was given (``{thread}``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import aiohttp
import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from docpilot.api.client import RemoteTurn
from docpilot.assistant.primer import history_messages
from docpilot.cli import main
from docpilot.config.target import Target
from docpilot.targets.ask import Endpoint, TargetReplyError, ask_target, request_body
from tests.docpilot.targets.test_ask import DOCS
from tests.support.recording_assistant import Recorder, serve_recorder

FIRST = "How do I create a token?"
FOLLOW_UP = "And how do I rotate it?"
REPLY = {"answer": "answer", "sources": "sources"}
SOURCE_IDS = {"base_url": "https://docs.acme.test/", "suffixes": [".html"]}


@pytest.fixture()
def recorded() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    with serve_recorder(recorder) as base:
        yield base, recorder


def _target(base: str, **fields: object) -> Target:
    data = {"url": f"{base}/chat", "reply": REPLY, "source_ids": SOURCE_IDS, **fields}
    return Target.model_validate(json.loads(json.dumps(data).replace("{base}", base)))


def _ask(target: Target, question: str, **conversation: object) -> RemoteTurn:
    async def run() -> RemoteTurn:
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, Endpoint.open(target), question, None, "chat-1/1",
                                    **conversation)  # type: ignore[arg-type]

    return asyncio.run(run())


# --- history: the body carries the earlier turns ---

def test_history_mode_sends_the_first_turn_s_question_and_its_own_answer(recorded):
    base, recorder = recorded
    target = _target(base, body={"question": "{question}", "history": "{history}"})
    assert target.conversation == "history"
    first = _ask(target, FIRST)
    assert first.error is None and first.answer == f"Answer 1 to: {FIRST} [1]"
    second = _ask(target, FOLLOW_UP, history=history_messages([(FIRST, first.answer)]))
    assert second.error is None
    turn_1, turn_2 = (r.body for r in recorder.requests)
    assert turn_1 == {"question": FIRST, "history": []}
    assert turn_2 == {"question": FOLLOW_UP, "history": [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": f"Answer 1 to: {FIRST} [1]"},
    ]}


def test_history_mode_sends_the_answer_given_in_place_of_the_assistant_s(recorded):
    base, recorder = recorded
    target = _target(base, body={"question": "{question}", "history": "{history}"})
    _ask(target, FIRST)
    given = "Create one under Settings › Tokens."
    _ask(target, FOLLOW_UP, history=history_messages([(FIRST, given)]))
    assert recorder.requests[1].body["history"] == [{"role": "user", "content": FIRST},
                                                     {"role": "assistant", "content": given}]


def test_messages_mode_sends_the_chat_with_the_question_last(recorded):
    base, recorder = recorded
    target = _target(base, url=f"{base}/messages", body={"model": "docs", "messages": "{messages}"})
    assert target.conversation == "messages"
    first = _ask(target, FIRST)
    second = _ask(target, FOLLOW_UP, history=history_messages([(FIRST, first.answer)]))
    assert second.answer == f"Answer 2 to: {FOLLOW_UP} [1]"  # the assistant read the question from the last message
    assert recorder.requests[0].body == {"model": "docs", "messages": [{"role": "user", "content": FIRST}]}
    assert recorder.requests[1].body["messages"] == [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": first.answer},
        {"role": "user", "content": FOLLOW_UP},
    ]


def test_a_placeholder_inside_a_longer_string_is_spliced_in_as_json():
    history = history_messages([(FIRST, "Use the CLI.")])
    body = request_body({"prompt": "Chat so far: {history}. Now: {question}", "t": "thread={thread}"},
                        FOLLOW_UP, None, "c/2", history=history)
    assert body == {"prompt": f"Chat so far: {json.dumps(history)}. Now: {FOLLOW_UP}", "t": "thread="}


def test_a_question_holding_a_placeholder_is_sent_as_written():
    # Regression: placeholders were replaced one after another, so an {id} inside the question was filled in too.
    assert request_body({"q": "Q: {question}"}, "What does {id} mean?", None, "r1") == {"q": "Q: What does {id} mean?"}


# --- thread: the assistant keeps the conversation, and names it in its replies ---

def test_thread_mode_sends_back_the_thread_the_first_reply_named(recorded):
    base, recorder = recorded
    target = _target(base, body={"question": "{question}", "thread_id": "{thread}"},
                     reply={**REPLY, "thread": "thread_id"})
    assert target.conversation == "thread"
    first = _ask(target, FIRST)
    assert first.thread == "thread-1"
    second = _ask(target, FOLLOW_UP, thread=first.thread)
    assert second.error is None and second.thread == "thread-1"
    turn_1, turn_2 = (r.body for r in recorder.requests)
    assert turn_1 == {"question": FIRST, "thread_id": None}  # the first turn opens a thread: null
    assert turn_2 == {"question": FOLLOW_UP, "thread_id": "thread-1"}
    assert recorder.threads == {"thread-1": [FIRST, FOLLOW_UP]}


def test_a_thread_in_the_url_and_a_header_goes_to_the_thread_s_endpoint(recorded):
    base, recorder = recorded
    target = _target(base, url=f"{base}/chat", thread_url=f"{base}/threads/{{thread}}/chat",
                     headers={"X-Thread": "{thread}"}, body={"question": "{question}"},
                     reply={**REPLY, "thread": "thread_id"})
    first = _ask(target, FIRST)
    second = _ask(target, FOLLOW_UP, thread=first.thread)
    assert second.error is None and second.thread == first.thread == "thread-1"
    turn_1, turn_2 = recorder.requests
    assert turn_1.path == "/chat" and "x-thread" not in turn_1.headers  # no thread yet: the header is left out
    assert turn_2.path == "/threads/thread-1/chat" and turn_2.headers["x-thread"] == "thread-1"
    assert recorder.threads == {"thread-1": [FIRST, FOLLOW_UP]}


def test_a_streamed_reply_names_its_thread_in_an_event_of_its_own(recorded):
    base, recorder = recorded
    target = _target(base, url=f"{base}/sse/chat", body={"question": "{question}", "thread_id": "{thread}"},
                     reply={"kind": "sse", "delta_event": "delta", "answer": "text", "sources_event": "sources",
                            "sources": "sources", "end_event": "done", "thread": "id", "thread_event": "thread"})
    first = _ask(target, FIRST)
    second = _ask(target, FOLLOW_UP, thread=first.thread)
    assert first.thread == second.thread == "thread-1"
    assert second.answer == f"Answer 2 to: {FOLLOW_UP} [1]"
    assert recorder.requests[1].body["thread_id"] == "thread-1"


def test_a_first_reply_that_names_no_thread_stops_the_run_and_a_later_one_keeps_its_thread(recorded):
    base, _ = recorded
    target = _target(base, body={"question": "{question}", "thread_id": "{thread}"},
                     reply={**REPLY, "thread": "conversation.id"})
    with pytest.raises(TargetReplyError, match=r"nothing at reply.thread 'conversation.id'; it has keys answer"):
        asyncio.run(_strict(target))
    later = _ask(target, FOLLOW_UP, thread="thread-1")
    assert later.error is None and later.thread == "thread-1"


async def _strict(target: Target) -> RemoteTurn:
    async with aiohttp.ClientSession() as client:
        return await ask_target(client, Endpoint.open(target), FIRST, None, "q", strict=True)


@pytest.mark.parametrize(("fields", "says"), [
    ({"body": {"q": "{question}", "t": "{thread}"}}, "body sends a thread, but reply.thread does not say"),
    ({"reply": {**REPLY, "thread": "thread_id"}}, "reply.thread reads a thread id that no request sends back"),
    ({"thread_url": "http://x.test/threads/{thread}"}, "thread_url sends a thread"),
    ({"reply": {**REPLY, "thread": "thread_id["}, "body": {"t": "{thread}"}}, "reply.thread: 'thread_id[' is not"),
])
def test_a_thread_half_configured_is_refused_when_the_config_loads(fields, says):
    with pytest.raises(ValidationError, match=says.replace("[", r"\[")):
        _target("http://x.test", **fields)


# --- golden check says how follow-ups will be asked ---

@pytest.mark.parametrize(("fields", "says"), [
    ({"body": {"question": "{question}", "history": "{history}"}},
     "conversation: history; follow-ups carry their earlier turns in the body ({history})"),
    ({"body": {"question": "{question}", "thread_id": "{thread}"}, "reply": {**REPLY, "thread": "thread_id"}},
     "conversation: thread; follow-ups are sent back the thread id the last reply named ({thread}); the sample "
     "reply named thread 'thread-1' at reply.thread"),
    ({"body": {"question": "{question}"}}, "conversation: none; follow-ups reach this target without their earlier "
     "turns"),
])
def test_golden_check_names_the_conversation_mode(recorded, tmp_path, fields, says):
    base, _ = recorded
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump([{"id": "q1", "question": FIRST, "gold": ["guide/auth#tokens"]}]))
    target = {"url": f"{base}/chat", "reply": REPLY, "source_ids": SOURCE_IDS, **fields}
    config = tmp_path / "docpilot.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"docs": str(DOCS)}, "golden": str(golden),
                                      "cache_dir": str(tmp_path / "cache"), "targets": {"chat": target}}))
    result = CliRunner().invoke(main, ["golden", "check", "--config", str(config), "--target", "chat"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert says in " ".join(result.output.split())
    shown = CliRunner().invoke(main, ["golden", "check", "--config", str(config), "--target", "chat", "--json"],
                               catch_exceptions=False)
    assert json.loads(shown.stdout)["target"]["conversation"]["mode"] == says.split(";")[0].split(": ")[1]
