"""Hybrid retrieval with ``fusion: scores``: BM25's share of its best possible score plus the cosine, on real files."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.errors import ConfigError
from docpilot.retrieval.bm25 import LexicalIndex
from docpilot.retrieval.index import dense_text, lexical_text
from docpilot.retrieval.rankers import Retriever
from docpilot.retrieval.tokens import terms
from tests.conftest import DATA, ROOT
from tests.docpilot.retrieval.test_embedders import WordHashEmbedder

HARBOR = DATA / "retrieval" / "docs"
QUESTION = "ship rate per metre of length at high water"


@pytest.fixture(scope="module")
def harbor():
    return load_corpus(HARBOR)


def _fused(corpus, **settings) -> Retriever:
    config = RetrievalConfig(retriever="hybrid", fusion="scores", **settings)
    return Retriever(corpus, config, embedder=WordHashEmbedder())


def _by_hand(corpus, question: str, bm25_weight: float = 1.0, dense_weight: float = 1.0) -> list[tuple[str, float]]:
    """Each section's fused score from its chunks, computed here from the formula alone."""
    settings = RetrievalConfig()
    texts = [lexical_text(corpus, c, settings) for c in corpus.chunks]
    lexical = LexicalIndex.build(texts, k1=settings.k1, b=settings.b)
    query = terms(question)
    bm25 = lexical.scores(query)
    # The best possible score: every query term at its highest weight in any chunk.
    single = [lexical.scores([t]) for t in query if t in lexical.vocabulary]
    best = sum(float(s.max()) for s in single)
    embedder = WordHashEmbedder()
    vectors = embedder.embed([dense_text(corpus, c) for c in corpus.chunks])
    cosine = vectors @ embedder.embed([question])[0]
    sections: dict[str, float] = {}
    for i, chunk in enumerate(corpus.chunks):
        if bm25[i] > 0:
            score = bm25_weight * bm25[i] / best + dense_weight * (1 + cosine[i]) / 2
            sections[chunk.section_id] = max(sections.get(chunk.section_id, -np.inf), float(score))
    return sorted(sections.items(), key=lambda pair: -pair[1])


def test_best_possible_adds_each_query_terms_highest_weight(harbor):
    lexical = Retriever(harbor).index.lexical
    ship, water = lexical.scores(["ship"]), lexical.scores(["water"])
    assert lexical.best_possible(["ship"]) == pytest.approx(float(ship.max()))
    assert lexical.best_possible(["ship", "water"]) == pytest.approx(float(ship.max() + water.max()))
    assert lexical.best_possible(["ship", "ship"]) == pytest.approx(2 * float(ship.max()))
    assert lexical.best_possible(["zyxwv"]) == 0.0
    assert lexical.best_possible([]) == 0.0


def test_a_section_scores_its_best_chunks_weighted_share_and_closeness(harbor):
    for weights in ({}, {"bm25_weight": 0.5, "dense_weight": 2.0}):
        hits = _fused(harbor, **weights).search(QUESTION, k=50)
        expected = _by_hand(harbor, QUESTION, **weights)
        assert [h.section_id for h in hits] == [s for s, _ in expected]
        assert [h.score for h in hits] == pytest.approx([v for _, v in expected], abs=1e-5)


def test_a_share_never_exceeds_one_so_the_fused_score_stays_below_the_weights_sum(harbor):
    hits = _fused(harbor, bm25_weight=1.0, dense_weight=0.0).search("slack water")
    assert hits and all(0 < h.score <= 1 + 1e-6 for h in hits)
    # With the embedding weighed out, the order is BM25's.
    plain = Retriever(harbor).search("slack water")
    assert [h.section_id for h in hits] == [h.section_id for h in plain]


def test_only_chunks_sharing_a_word_with_the_question_are_ranked(harbor):
    fused = _fused(harbor)
    assert fused.search("zyxwv qwertz") == []
    found = {h.section_id for h in fused.search("slack", k=50)}
    assert found == {h.section_id for h in Retriever(harbor).search("slack", k=50)}


def test_scope_holds_with_score_fusion(harbor):
    fused = _fused(harbor)
    scoped = fused.search(QUESTION, scope=["guide"], k=20)
    assert scoped and all(h.section_id.startswith(("guide/moorings#", "guide/tides#")) for h in scoped)
    assert fused.search(QUESTION, scope=["nowhere"]) == []


def test_the_fusion_is_a_ranking_setting_of_hybrid_only(harbor):
    rrf = Retriever(harbor, RetrievalConfig(retriever="hybrid", fusion="rrf"), embedder=WordHashEmbedder())
    assert _fused(harbor).fingerprint != rrf.fingerprint
    # The index is the same: only question-time ranking differs.
    assert _fused(harbor).index.fingerprint == rrf.index.fingerprint
    bm25 = RetrievalConfig(retriever="bm25")
    assert Retriever(harbor, bm25.model_copy(update={"fusion": "rrf"})).fingerprint == Retriever(harbor, bm25).fingerprint


def test_an_unknown_fusion_is_a_config_error(harbor, tmp_path):
    with pytest.raises(ConfigError, match="rrf, scores"):
        Retriever(harbor, RetrievalConfig(retriever="hybrid", fusion="sum"), embedder=WordHashEmbedder())
    with pytest.raises(ConfigError, match="unknown fusion 'sum'"):
        Retriever.open(harbor, RetrievalConfig(fusion="sum"), cache_dir=tmp_path)


def test_an_unknown_fusion_in_the_config_file_exits_2(tmp_path):
    config = tmp_path / "docpilot.yaml"
    config.write_text("retrieval:\n  retriever: hybrid\n  embedder: static\n  fusion: sum\n")
    # Run from tmp_path, so nothing lands in the repository, with this checkout importable.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(
        [sys.executable, "-m", "docpilot", "index", "--docs", str(HARBOR), "--config", str(config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert completed.returncode == 2
    assert "unknown fusion 'sum'" in completed.stderr and "rrf, scores" in completed.stderr
    assert "Traceback" not in completed.stderr
