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


_FORKED = r"""
import json, os, signal, sys
from docpilot.assistant import language
import py3langid.langid

texts = json.loads(sys.argv[1])
language.load_for_forks()
if sys.argv[2] == "kill-helper":
    os.kill(language._shared.helper.pid, signal.SIGKILL)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    if sys.argv[2] == "helper-only":  # the child must not load the model itself
        py3langid.langid.LanguageIdentifier.from_model_file = None
    found = [language._identifier().classify(t) for t in texts]
    os.write(write, json.dumps([[lang, float(p)] for lang, p in found]).encode())
    os._exit(0)
os.close(write)
out = b""
while chunk := os.read(read, 1 << 16):
    out += chunk
os.waitpid(pid, 0)
language.end_load_for_forks()
print(out.decode())
"""

_TEXTS = ["Will it rain tomorrow?", "Kann ich Temperaturen in Fahrenheit eingeben?",
          "Run the evaluation with the gate only flag to measure retrieval alone.", "¿Dónde está la estación?"]


def _classified_in_a_fork(mode: str) -> list[list]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _FORKED, json.dumps(_TEXTS), mode], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


def test_a_forked_child_reads_the_model_the_helper_loaded_and_detects_as_the_model_does():
    from docpilot.assistant.language import _identifier

    here = [[lang, float(p)] for lang, p in (_identifier().classify(t) for t in _TEXTS)]
    assert _classified_in_a_fork("helper-only") == here


def test_a_helper_that_died_leaves_each_child_to_load_the_model_itself():
    from docpilot.assistant.language import _identifier

    here = [[lang, float(p)] for lang, p in (_identifier().classify(t) for t in _TEXTS)]
    assert _classified_in_a_fork("kill-helper") == here
