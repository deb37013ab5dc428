"""The extractive baseline: quotes matching sentences with markers, refuses on weak evidence."""

from __future__ import annotations

import asyncio

from docpilot.models.base import Prompt, Source, parse_refusal
from docpilot.models.extractive import ExtractiveModel, document_frequencies

TEXTS = [
    "Rotate a token every ninety days. The old token stops working one hour later.",
    "Run `acme rollback` to return to the previous release. Acme keeps the last ten releases.",
    "Install Acme with `pip install acme-cli`. It needs Python 3.11 or newer.",
]
MODEL = ExtractiveModel(idf=document_frequencies(TEXTS), min_evidence=0.4, max_sentences=2)


def prompt(question: str) -> Prompt:
    sources = [Source(n=i + 1, section_id=f"p{i}#s", title=f"Page {i}", text=t) for i, t in enumerate(TEXTS)]
    return Prompt(question=question, sources=sources)


def test_answers_with_the_best_sentence_and_its_marker():
    turn = asyncio.run(MODEL.complete(prompt("How often should I rotate a token?")))
    assert not turn.refused
    assert turn.answer.startswith("Rotate a token every ninety days. [1]")
    assert turn.first_token_ms is not None and turn.first_token_ms <= turn.latency_ms


def test_refuses_when_no_sentence_covers_the_question():
    turn = asyncio.run(MODEL.complete(prompt("Does Acme support Kubernetes clusters?")))
    assert turn.refused and turn.refusal_cause == "not-answerable"
    assert parse_refusal(turn.answer) == "not-answerable"


def test_refuses_with_no_sources():
    turn = asyncio.run(MODEL.complete(Prompt(question="How do I install it?")))
    assert turn.refused


def test_is_deterministic():
    question = "Which Python version does Acme need to install?"
    assert MODEL.compose(prompt(question)) == MODEL.compose(prompt(question))
    assert "[3]" in MODEL.compose(prompt(question))


def test_code_fences_are_not_quoted():
    source = Source(n=1, section_id="p#s", title="T", text="```\nrotate token rotate token every day\n```\nRotate a token every ninety days.")
    answer = MODEL.compose(Prompt(question="How often do I rotate a token?", sources=[source]))
    assert answer == "Rotate a token every ninety days. [1]"


def test_parse_refusal_reads_the_protocol():
    assert parse_refusal("REFUSE: out-of-scope\nsorry") == "out-of-scope"
    assert parse_refusal("  refuse: unsafe") == "unsafe"
    assert parse_refusal("REFUSE: because") == "not-answerable"
    assert parse_refusal("The answer is REFUSE: x") is None


# Regression: a doc sentence holding "[7]" was quoted as is and read as a citation marker.
def test_brackets_in_quoted_text_do_not_become_markers():
    source = Source(n=1, section_id="p#s", title="T", text="A marker such as [7] that names no source is removed.")
    answer = MODEL.compose(Prompt(question="What happens to a marker that names no source?", sources=[source]))
    assert answer == "A marker such as (7) that names no source is removed. [1]"
