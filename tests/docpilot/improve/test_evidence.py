"""Evidence for edits: which words of the docs are common, and so never a vocabulary target."""

from __future__ import annotations

import pytest

from docpilot.corpus.pages import load_corpus
from docpilot.improve.evidence import Evidence, missing_words
from docpilot.improve.taxonomy import RunSettings
from docpilot.retrieval.tokens import terms
from docpilot.schema import Report, Row
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def evidence():
    report = Report(run_id="r", created_at="2026-01-01T00:00:00+00:00", config={}, fingerprints={}, rows=[],
                    summary={}, gates=[], verdict="pass")
    return Evidence(report=report, run=RunSettings(), corpus=load_corpus(ROOT / "docs"))


def test_english_function_words_and_words_across_the_docs_are_common(evidence):
    assert evidence.is_common(terms("some")[0])  # common in any English text
    assert evidence.is_common(terms("gold")[0])  # in a fifth of the demo docs' sections
    assert not evidence.is_common(terms("fingerprint")[0])


def test_vocabulary_targets_and_keys_are_never_common(evidence):
    # Regression: `improve` suggested the vocabulary entry "computed": ["gold", "some"].
    sections = list(evidence.corpus.sections.values())[::7]
    for section in sections:
        row = Row(id="q", kind="positive", split="dev", question="How is some gold computed here?",
                  gold=[section.id])
        for word in missing_words(row, evidence.corpus, section, evidence):
            assert not evidence.is_common(terms(word)[0]), (section.id, word)
