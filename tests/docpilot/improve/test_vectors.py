"""`improve` reuses the run's index and embeds each question once, across runs (docpilot.improve.vectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import load_corpus
from docpilot.improve.evidence import Evidence
from docpilot.improve.taxonomy import RunSettings
from docpilot.improve.vectors import FOLDER, RememberingEmbedder
from docpilot.reports.report import score
from docpilot.retrieval.embedders import StaticEmbedder
from docpilot.retrieval.rankers import Retriever
from docpilot.schema import Report

DOCS = Path(__file__).resolve().parents[2] / "data" / "improve" / "docs"
HYBRID = RetrievalConfig(retriever="hybrid", embedder="static")


class Counting:
    """The static embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = StaticEmbedder()
        self.name, self.texts = self.inner.name, []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)


def test_each_text_is_embedded_once_and_kept_for_the_next_process(tmp_path):
    first = Counting()
    remembering = RememberingEmbedder(first, tmp_path)
    vectors = remembering.embed(["rotate a token", "install", "rotate a token"])
    assert first.texts == ["rotate a token", "install"]
    np.testing.assert_allclose(vectors[0], vectors[2])
    np.testing.assert_allclose(vectors[1], StaticEmbedder().embed(["install"])[0], atol=1e-6)
    remembering.save()
    again = Counting()
    later = RememberingEmbedder(again, tmp_path).embed(["install", "rotate a token"])
    assert again.texts == []
    np.testing.assert_allclose(later, vectors[[1, 0]])


def test_a_damaged_or_foreign_file_is_ignored_and_written_over(tmp_path):
    remembering = RememberingEmbedder(Counting(), tmp_path)
    remembering.embed(["install"])
    remembering.save()
    (stored,) = tmp_path.glob("*/vectors.npz")
    for junk in (b"not an array", None):
        if junk is None:
            np.save(stored.open("wb"), np.zeros(3), allow_pickle=False)  # a bare array, not the pair saved
        else:
            stored.write_bytes(junk)
        counting = Counting()
        RememberingEmbedder(counting, tmp_path).embed(["install"])
        assert counting.texts == ["install"]


def _report(cache_dir: Path) -> Report:
    summary, counts, gates, verdict = score([], {}, gate_only=True)
    config = {"corpus": {"docs": str(DOCS)}, "retrieval": HYBRID.model_dump(), "cache_dir": str(cache_dir)}
    return Report(run_id="20260101T000000Z-aaaaaa", created_at="2026-01-01T00:00:00+00:00", config=config,
                  fingerprints={"golden": "g"}, rows=[], summary=summary, counts=counts, gates=gates,
                  verdict=verdict)


# Regression: a warm improve of a hybrid run took 11 s, building the index and embedding every question again.
def test_evidence_opens_the_runs_saved_index_and_remembers_its_questions(tmp_path):
    corpus = load_corpus(DOCS)
    cache = tmp_path / "cache"
    saved = Retriever.open(corpus, HYBRID, cache_dir=cache)  # what the eval leaves behind
    assert saved.index.built
    evidence = Evidence(report=_report(cache), run=RunSettings(), corpus=corpus)
    retriever = evidence.retriever()
    assert not retriever.index.built and retriever.index.path == saved.index.path
    counting = Counting()
    evidence.embedder.inner = counting
    first = retriever.search("How do I rotate a token?")
    assert retriever.search("How do I rotate a token?") == first
    assert counting.texts == ["How do I rotate a token?"]
    evidence.embedder.save()
    assert list((cache / FOLDER).glob("*/vectors.npz"))
    evidence = Evidence(report=_report(cache), run=RunSettings(), corpus=corpus)
    evidence.retriever()
    evidence.embedder.inner = counting
    assert evidence.retriever().search("How do I rotate a token?") == first
    assert counting.texts == ["How do I rotate a token?"]  # the second run embedded nothing
