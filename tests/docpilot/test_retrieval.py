"""The BM25 retriever on a three-page corpus written for these tests."""

from __future__ import annotations

import json
import shutil

import pytest

from docpilot.config import RetrievalConfig
from docpilot.corpus import load_corpus
from docpilot.errors import ConfigError
from docpilot.retrieval import Retriever, in_scope
from tests.conftest import DATA

DOCS = DATA / "pipeline" / "docs"


@pytest.fixture(scope="module")
def retriever():
    return Retriever(load_corpus(DOCS))


def test_the_section_that_answers_ranks_first(retriever):
    hits = retriever.search("How can I roll back to the previous release?")
    assert hits[0].section_id == "guide/deploy#rollback"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_sections_appear_once_and_top_k_caps_the_list(retriever):
    hits = retriever.search("acme token deploy install release", k=3)
    assert len(hits) == 3
    assert len({h.section_id for h in hits}) == 3


def test_a_question_with_no_known_word_retrieves_nothing(retriever):
    assert retriever.search("zyxwv qwertz") == []


def test_scope_restricts_to_page_prefixes(retriever):
    hits = retriever.search("token", scope=["guide/deploy"])
    assert hits == [] or all(h.section_id.startswith("guide/deploy#") for h in hits)
    scoped = retriever.search("How do I install Acme?", scope=["guide"])
    assert scoped and all(h.section_id.startswith("guide/") for h in scoped)


def test_in_scope_matches_whole_path_segments():
    assert in_scope("guide/auth", ["guide"])
    assert in_scope("guide/auth", ["guide/auth"])
    assert not in_scope("guidebook/x", ["guide"])
    assert in_scope("anything", None)


def test_heading_words_count(retriever):
    # "Rotating tokens" is a heading; the section text says "Rotate a token".
    assert retriever.search("rotating")[0].section_id == "guide/auth#rotating-tokens"


def test_vocabulary_bridges_user_words_to_doc_words(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    question = "Can I undo my last upload?"
    without = Retriever(load_corpus(docs)).search(question)
    assert without[0].section_id == "guide/deploy#deploy-a-site"  # "upload" is in the deploy text
    (docs / "vocabulary.json").write_text(json.dumps({"undo": ["rollback", "previous release"]}))
    with_vocabulary = Retriever(load_corpus(docs))
    assert "rollback" in with_vocabulary.query_terms(question)
    assert with_vocabulary.search(question)[0].section_id == "guide/deploy#rollback"


def test_fingerprint_follows_settings(retriever):
    other = Retriever(retriever.corpus, RetrievalConfig(k1=1.5))
    assert other.fingerprint != retriever.fingerprint
    assert Retriever(retriever.corpus).fingerprint == retriever.fingerprint


def test_unknown_retriever_is_a_config_error(retriever):
    with pytest.raises(ConfigError, match="bm25"):
        Retriever(retriever.corpus, RetrievalConfig(retriever="tfidf"))
