"""The primer: numbered sources in rank order and the instruction the scorer relies on."""

from __future__ import annotations

from docpilot.assistant.primer import (
    HISTORY_CHARS,
    HISTORY_MESSAGE_CHARS,
    HISTORY_MESSAGES,
    SYSTEM,
    bounded_history,
    earlier_turns,
    history_messages,
    prime,
)
from docpilot.assistant.turn import search_query
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


# A follow-up's prompt -------------------------------------------------------------

QUESTION = "How do I rollback a release?"


def _history(exchanges: int, answer: str = "Run acme rollback [1].") -> list[dict[str, str]]:
    return history_messages([(f"Question {i}?", f"{answer} ({i})") for i in range(1, exchanges + 1)])


def test_a_single_question_s_messages_are_those_written_before_conversations():
    # The model stage's cache keys on these messages: a byte changed would re-ask every stored question.
    hits = Retriever(CORPUS).search(QUESTION)
    prompt = prime(QUESTION, hits, CHUNKS)
    blocks = "\n\n".join(f"[{s.n}] {s.title} ({s.section_id})\n{s.text}" for s in prompt.sources)
    assert prompt.messages == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Sources:\n\n{blocks}\n\nQuestion: {QUESTION}"},
    ]
    assert prime(QUESTION, hits, CHUNKS, history=[]).messages == prompt.messages


def test_the_earlier_turns_go_between_the_instruction_and_the_question():
    hits = Retriever(CORPUS).search(QUESTION)
    history = history_messages([("How do I deploy?", "Run acme deploy [1]."), ("And on staging?", None)])
    prompt = prime(QUESTION, hits, CHUNKS, history=history)
    assert [m["role"] for m in prompt.messages] == ["system", "user", "assistant", "user", "user"]
    assert prompt.messages[1:4] == [
        {"role": "user", "content": "How do I deploy?"},
        {"role": "assistant", "content": "Run acme deploy [1]."},
        {"role": "user", "content": "And on staging?"},
    ]
    single = prime(QUESTION, hits, CHUNKS)
    assert prompt.messages[0] == single.messages[0] and prompt.messages[-1] == single.messages[-1]
    assert prompt.sources == single.sources and prompt.question == QUESTION


def test_a_long_conversation_keeps_its_latest_exchanges_within_the_message_bound():
    history = _history(10)
    kept = bounded_history(history)
    assert len(kept) == HISTORY_MESSAGES
    assert kept == history[-HISTORY_MESSAGES:]
    assert kept[0] == {"role": "user", "content": "Question 7?"}


def test_the_character_budget_drops_the_oldest_and_never_opens_with_an_answer():
    history = history_messages([("q" * 1995, "a" * 2000), ("Rollback?", "b" * 2000)])
    kept = bounded_history(history)
    # The newest three fit in 6,000 characters, the fourth does not; the third is an answer, dropped with it.
    assert kept == history[-2:]
    assert sum(len(m["content"]) for m in bounded_history(_history(6, "x" * 1800))) <= HISTORY_CHARS


def test_one_message_past_its_bound_keeps_its_start_marked_as_cut():
    long = "word " * 1000
    (kept,) = bounded_history([{"role": "user", "content": long}])
    assert len(kept["content"]) == HISTORY_MESSAGE_CHARS
    assert kept["content"].endswith(" …") and long.startswith(kept["content"][:-2])


def test_history_reads_back_as_the_turns_it_was_built_from():
    earlier = [("How do I deploy?", "Run acme deploy [1]."), ("And on staging?", None), ("Rollback?", "Yes.")]
    assert earlier_turns(history_messages(earlier)) == earlier
    assert history_messages([("Failed turn?", "  ")]) == [{"role": "user", "content": "Failed turn?"}]
    assert earlier_turns([{"role": "assistant", "content": "Hello."}]) == [("", "Hello.")]


def test_a_first_question_is_searched_as_asked():
    assert search_query("How do I deploy?", []) == "How do I deploy?"
