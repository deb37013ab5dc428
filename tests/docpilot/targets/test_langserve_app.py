"""The LangServe app the targets are measured against: a tutorial RAG chain over the demo docs, served for real.

These tests hold the app itself to what it stands for (LangServe's `/invoke` and `/stream`
agree, the answers repeat) and its oracle (``section_ids``) to the corpus, so a test of
DocPilot's target code that reads this app knows which side broke.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from docpilot.corpus.pages import load_corpus

# Importing LangChain and cutting the demo docs take seconds, before the server starts.
pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[3] / "docs"
QUESTION = "How do I set a target's headers?"


@pytest.fixture(scope="module")
def app() -> ModuleType:
    """The app's module, imported by the tests that run (LangChain is not imported where this tier is left out)."""
    pytest.importorskip("langserve", reason="langserve (the test extra) is not installed")
    from tests.support import langserve_app

    return langserve_app


@pytest.fixture(scope="module")
def app_url(app) -> Iterator[str]:
    with app.serving(DOCS) as url:
        yield url


def _invoke(url: str, question: str) -> dict:
    reply = httpx.post(f"{url}/rag/invoke", json={"input": {"question": question}}, timeout=30)
    reply.raise_for_status()
    return reply.json()


def _stream(url: str, question: str) -> list[tuple[str, str | None]]:
    """The reply's events as (name, data), data None where the event carries none."""
    with httpx.stream("POST", f"{url}/rag/stream", json={"input": {"question": question}}, timeout=30) as reply:
        reply.raise_for_status()
        text = reply.read().decode()
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if block.strip():
            events.append((fields["event"], fields.get("data")))
    return events


def test_invoke_returns_the_chains_question_context_and_answer(app, app_url):
    reply = _invoke(app_url, QUESTION)

    output = reply["output"]
    assert list(output) == ["question", "context", "answer"]
    assert output["question"] == QUESTION
    assert set(reply["metadata"]) == {"run_id", "feedback_tokens"}
    assert len(output["context"]) == 4
    for doc in output["context"]:
        assert doc["type"] == "Document" and doc["page_content"]
        source = Path(doc["metadata"]["source"])  # as the loader gives it: the served folder joined with the page
        assert source.suffix == ".md" and source.is_relative_to(DOCS)
    assert app.section_ids(output["context"], DOCS) == app.section_ids(app.retrieve(DOCS, QUESTION), DOCS)


def test_stream_sends_the_invoke_context_then_the_answer_in_words(app_url):
    invoked = _invoke(app_url, QUESTION)["output"]

    events = _stream(app_url, QUESTION)

    assert events[0][0] == "metadata" and "run_id" in json.loads(events[0][1])
    assert events[-1] == ("end", None)
    chunks = [json.loads(data) for name, data in events[1:-1] if name == "data"]
    assert len(chunks) == len(events) - 2
    assert chunks[0] == {"question": QUESTION}
    assert chunks[1] == {"context": invoked["context"]}
    pieces = [chunk["answer"] for chunk in chunks[2:]]
    assert len(pieces) > 2
    assert "".join(pieces) == invoked["answer"]


def test_the_answer_is_the_top_documents_first_sentence_every_time(app_url):
    first = _invoke(app_url, QUESTION)["output"]
    again = _invoke(app_url, QUESTION)["output"]

    assert again["answer"] == first["answer"] and again["context"] == first["context"]
    top = " ".join(first["context"][0]["page_content"].split())
    assert top.startswith(first["answer"])


def test_every_split_of_the_demo_docs_names_a_section_of_its_own(app):
    splits = app.load_splits(DOCS)

    ids = app.section_ids(splits, DOCS)

    sections = load_corpus(DOCS).sections
    assert [i for i in ids if i not in sections and not i.endswith("#")] == []
    assert len(set(ids)) == len(ids) == len(splits)


def test_section_ids_follow_the_identifier_rules(app, tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "index.md").write_text("# Home\n\nwelcome.\n")
    (tmp_path / "guide" / "index.md").write_text(
        "preamble.\n\n# Guide\n\n## Set up { #install }\n\ninstall.\n\n## Example\n\nfirst.\n\n"
        "# Other\n\n## Example\n\nsecond.\n"
    )
    (tmp_path / "auth.md").write_text("# Auth\n\n### Tokens: `Bearer` [header](#h)\n\ntokens.\n")

    splits = app.load_splits(tmp_path)

    found = dict(zip((split.page_content for split in splits), app.section_ids(splits, tmp_path), strict=True))
    assert found == {
        "welcome.": "index#home",
        "preamble.": "guide#",
        "install.": "guide#install",
        "first.": "guide#example",
        "second.": "guide#example-1",
        "tokens.": "auth#tokens-bearer-header",
    }
