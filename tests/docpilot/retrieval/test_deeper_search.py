"""A deeper search gives the same top sections as a plain one, then the sections ranked after them."""

from __future__ import annotations

import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.rankers import Retriever
from tests.conftest import DATA
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder

HARBOR = DATA / "retrieval" / "docs"  # holds reference/fees, a reference page, so the cap applies
QUESTIONS = ("ship rate per metre of length at high water", "slack water", "fees tariff berth", "tide")
SETTINGS = [
    {"retriever": "bm25"},
    {"retriever": "bm25", "reference_slots": 0},
    {"retriever": "bm25", "reference_slots": 8},
    {"retriever": "dense"},
    {"retriever": "hybrid", "fusion": "rrf", "fusion_depth": 5},
    {"retriever": "hybrid", "fusion": "scores", "reference_slots": 1},
]


@pytest.fixture(scope="module")
def harbor():
    return load_corpus(HARBOR)


def _retriever(corpus, settings: dict) -> Retriever:
    embedder = None if settings["retriever"] == "bm25" else WordHashEmbedder()
    return Retriever(corpus, RetrievalConfig(**settings), embedder=embedder)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{v}" for v in s.values()))
def test_the_top_sections_do_not_depend_on_the_depth(harbor, settings):
    retriever = _retriever(harbor, settings)
    for question in QUESTIONS:
        for k in (1, 3, 8):
            plain = retriever.search(question, k=k)
            for depth in (0, k, 20, 100):
                hits, deeper = retriever.search_deeper(question, k=k, depth=depth)
                assert hits == plain, (question, k, depth)
                ranked = [h.section_id for h in hits] + deeper
                assert len(ranked) == len(set(ranked)) <= max(k, depth)


def test_without_a_cap_the_deeper_ids_continue_the_plain_ranking(harbor):
    retriever = _retriever(harbor, {"retriever": "bm25", "reference_slots": 8})
    found_deeper = False
    for question in QUESTIONS:
        hits, deeper = retriever.search_deeper(question, k=3, depth=30)
        assert [h.section_id for h in hits] + deeper == [h.section_id for h in retriever.search(question, k=30)]
        found_deeper = found_deeper or bool(deeper)
    assert found_deeper  # the corpus ranks some question past its top 3


def test_a_deeper_search_keeps_to_the_scope(harbor):
    retriever = _retriever(harbor, {"retriever": "bm25"})
    hits, deeper = retriever.search_deeper(QUESTIONS[0], scope=["guide"], k=2, depth=50)
    assert hits and all(s.startswith("guide/") for s in [h.section_id for h in hits] + deeper)
    assert retriever.search_deeper(QUESTIONS[0], scope=["nowhere"], k=2, depth=50) == ([], [])
