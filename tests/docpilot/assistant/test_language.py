"""Language detection: only reliable detections count; short texts fall back to what the record and docs say."""

from __future__ import annotations

from docpilot.assistant.language import (
    corpus_language,
    detect_language,
    expected_language,
)
from docpilot.corpus.pages import load_corpus
from tests.conftest import DATA


def test_a_short_text_the_model_is_unsure_of_has_no_language():
    # Regression: this question was read as German (p = 0.64) and failed language_match.
    assert detect_language("Can I enter temperatures in Fahrenheit?") is None


def test_a_short_text_the_model_is_sure_of_keeps_its_language():
    assert detect_language("Kann ich Temperaturen in Fahrenheit eingeben?") == "de"
    assert detect_language("Will it rain tomorrow?") == "en"


def test_a_long_text_keeps_its_language_whatever_the_confidence():
    text = ("Run the evaluation with the gate only flag to measure retrieval alone, without calling "
            "any model at all, which costs nothing and finishes in seconds.")
    assert detect_language(text) == "en"


def test_no_words_is_no_language():
    assert detect_language("") is None and detect_language("[1] `x` 42") is None


def test_the_expected_language_is_the_records_then_the_questions_then_the_corpus():
    assert expected_language("pt-BR", "en", "en") == "pt-BR"
    assert expected_language(None, "de", "en") == "de"
    assert expected_language(None, None, "en") == "en"
    assert expected_language(None, None, None) is None


def test_the_corpus_language_comes_from_its_text():
    assert corpus_language(load_corpus(DATA / "pipeline" / "docs")) == "en"
