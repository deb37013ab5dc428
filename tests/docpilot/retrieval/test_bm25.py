"""BM25 weights: Lucene's formula, the same to the last bit as bm25s's, saved and loaded unchanged."""

from __future__ import annotations

import logging

import bm25s
import numpy as np
import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.retrieval.bm25 import LexicalIndex
from docpilot.retrieval.index import lexical_text
from docpilot.retrieval.tokens import terms
from tests.conftest import ROOT

logging.getLogger("bm25s").setLevel(logging.WARNING)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    corpus = load_corpus(ROOT / "docs")  # the project's own manual: real pages, thousands of terms
    return [lexical_text(corpus, chunk, RetrievalConfig()) for chunk in corpus.chunks] + [""]


def _columns(data, indices, indptr, vocabulary):
    return {term: (indices[indptr[i]:indptr[i + 1]].tolist(), data[indptr[i]:indptr[i + 1]].tolist())
            for term, i in vocabulary.items()}


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0)])
def test_every_weight_equals_bm25s_lucene_to_the_last_bit(texts, k1, b):
    ours = LexicalIndex.build(texts, k1=k1, b=b)
    reference = bm25s.BM25(k1=k1, b=b, method="lucene")
    reference.index([terms(text) or ["_empty_"] for text in texts], show_progress=False)
    scores = reference.scores
    assert ours.size == scores["num_docs"] == len(texts)
    # bm25s keeps an empty string in its vocabulary, in no chunk; every other term is in both.
    assert reference.vocab_dict.keys() - ours.vocabulary.keys() == {""}
    vocabulary = {term: i for term, i in reference.vocab_dict.items() if term}
    expected = _columns(np.asarray(scores["data"]), np.asarray(scores["indices"]), np.asarray(scores["indptr"]),
                        vocabulary)
    assert _columns(ours._data, ours._indices, ours._indptr, ours.vocabulary) == expected


def test_a_question_scores_the_sum_of_its_terms_weights(texts):
    index = LexicalIndex.build(texts, k1=1.2, b=0.75)
    query = terms("How do I set a gate on recall in CI?")
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    reference.index([terms(text) or ["_empty_"] for text in texts], show_progress=False)
    expected = reference.get_scores([t for t in query if t in reference.vocab_dict])
    np.testing.assert_allclose(index.scores(query), expected, rtol=1e-6)
    assert index.scores(["nowordlikethis"]) is None


def test_a_saved_index_loads_with_the_same_scores(texts, tmp_path):
    index = LexicalIndex.build(texts, k1=1.2, b=0.75)
    index.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    query = terms("roll back a release and rotate the token")
    assert loaded.vocabulary == index.vocabulary and loaded.size == index.size
    assert np.array_equal(loaded.scores(query), index.scores(query))
    assert loaded.best_possible(query) == index.best_possible(query)
