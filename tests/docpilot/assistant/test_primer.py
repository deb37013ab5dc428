"""The primer: numbered sources in rank order and the instruction the scorer relies on."""

from __future__ import annotations

from docpilot.assistant.primer import SYSTEM, prime
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.rankers import Retriever
from tests.conftest import DATA

CORPUS = load_corpus(DATA / "pipeline" / "docs")
CHUNKS = {c.id: c for c in CORPUS.chunks}


def test_sources_are_numbered_in_rank_order_and_capped():
    hits = Retriever(CORPUS).search("acme token release install deploy", k=8)
    prompt = prime("q?", hits, CHUNKS, k=3)
    assert [s.n for s in prompt.sources] == [1, 2, 3]
    assert [s.section_id for s in prompt.sources] == [h.section_id for h in hits[:3]]
    assert prompt.sources[0].text == CHUNKS[hits[0].chunk_id].text


def test_messages_carry_the_sources_the_question_and_the_refusal_protocol():
    hits = Retriever(CORPUS).search("How do I rollback a release?")
    prompt = prime("How do I rollback a release?", hits, CHUNKS)
    system, user = prompt.messages
    assert system == {"role": "system", "content": SYSTEM}
    assert "REFUSE: not-answerable" in system["content"] and "[1]" in system["content"]
    assert user["content"].startswith("Sources:\n\n[1] Deploying › Rollback (guide/deploy#rollback)")
    assert user["content"].endswith("Question: How do I rollback a release?")


def test_no_hits_gives_a_prompt_with_no_sources():
    prompt = prime("anything", [], CHUNKS)
    assert prompt.sources == [] and "(no sources)" in prompt.messages[1]["content"]
