"""Follow-ups asked of a LangChain app with chat history, served by LangServe, as targets.

The app (``tests.support.langserve_app``) is written as LangChain's "add chat history"
tutorial writes one: a follow-up and its ``chat_history`` (LangChain messages) at
``/rag-chat``, and LangServe's chat playground input, a list of messages whose last is the
question, at ``/chat``. A target with ``message_shape: langchain`` sends the earlier turns
in that shape (``{history}``, ``{messages}``); what the app read is in its own reply (the
tutorial's chain returns its input), and what it searched is checked against its
retriever, asked in this process for the standalone question its rewriter makes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from docpilot.api.client import RemoteTurn
from docpilot.assistant.primer import history_messages
from docpilot.config.target import Target
from docpilot.targets.ask import Endpoint, ask_target

pytestmark = pytest.mark.slow
pytest.importorskip("langserve")

DOCS = Path(__file__).resolve().parents[2] / "data" / "pipeline" / "docs"
FIRST = "How do I roll back a release?"
FOLLOW_UP = "Which flag keeps the old version?"
READ = {"answer": "output.answer", "sources": "output.context", "source_id": "metadata.source"}


@pytest.fixture(scope="module")
def app() -> Iterator[str]:
    from tests.support.langserve_app import serving

    with serving(DOCS) as base:
        yield base


def _ask(target: Target, question: str, history: list[dict[str, str]] | None = None) -> RemoteTurn:
    async def run() -> RemoteTurn:
        async with aiohttp.ClientSession() as client:
            return await ask_target(client, Endpoint.open(target), question, None, "chat/1", history=history or [])

    return asyncio.run(run())


def _sources(turn: RemoteTurn) -> list[str]:
    return [s.url for s in turn.retrieval.primed]  # type: ignore[union-attr]


@pytest.mark.parametrize(("route", "body"), [
    ("rag-chat", {"input": {"question": "{question}", "chat_history": "{history}"}}),
    ("chat", {"input": {"messages": "{messages}"}}),
])
def test_a_follow_up_reaches_the_app_with_its_earlier_turn_and_is_searched_with_it(app, route, body):
    from tests.support.langserve_app import retrieve, standalone_question

    target = Target.model_validate({"url": f"{app}/{route}/invoke", "body": body, "reply": READ,
                                    "message_shape": "langchain"})
    assert target.conversation == ("history" if route == "rag-chat" else "messages")
    first = _ask(target, FIRST)
    assert first.error is None and first.answer
    assert _sources(first) == [d.metadata["source"] for d in retrieve(DOCS, FIRST)]
    second = _ask(target, FOLLOW_UP, history_messages([(FIRST, first.answer)]))
    assert second.error is None and second.answer
    (reply,) = (event.data for event in second.events)
    read = [(m["type"], m["content"]) for m in reply["output"]["chat_history"]]
    assert read == [("human", FIRST), ("ai", first.answer)]  # the app took the assistant's own answer as its turn
    assert reply["output"]["question"] == FOLLOW_UP
    searched = standalone_question(FOLLOW_UP, [HumanMessage(FIRST), AIMessage(first.answer)])
    assert searched == f"{FIRST} {FOLLOW_UP}"
    assert _sources(second) == [d.metadata["source"] for d in retrieve(DOCS, searched)]
    assert _sources(second) != [d.metadata["source"] for d in retrieve(DOCS, FOLLOW_UP)]  # alone, it finds others
