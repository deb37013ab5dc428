"""Offline language identification for questions and answers (py3langid's bundled model).

A short text says little about its language: "Can I enter temperatures in Fahrenheit?"
reads as German to the model, with a probability of 0.64. So a detection counts only
when the text is long enough (``MIN_WORDS``) or the model is sure (``MIN_CONFIDENCE``);
otherwise there is no detection, and the row falls back to the record's `language`,
then to the corpus's language (``expected_language``), rather than failing a record
on a guess.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from functools import lru_cache

from docpilot.errors import StorageError

# Restricting the candidates keeps short questions from being read as rare languages.
CANDIDATES = (
    "en de fr es it pt nl sv da no fi pl cs ru uk tr ar he hi ja ko zh id vi el hu ro".split()
)
_MARKERS = re.compile(r"\[[^\]]*\]|`[^`]*`|https?://\S+")

MIN_WORDS = 12
"""A text of at least this many words is long enough to trust its detected language."""

MIN_CONFIDENCE = 0.9
"""Below ``MIN_WORDS``, a detection counts only at this probability or above."""

RULE = "words>=12|p>=0.9"
"""The rule above, stored with cached detections so that ones made under another rule are made again."""

_CORPUS_SAMPLE_CHARS = 20_000  # plenty for a sure detection, little enough to be quick


_LOADING = threading.Lock()


def preload(*, urgent: bool = False) -> None:
    """Load the language model in the background; a run that will detect languages starts it early.

    Loading is slow enough for the first turns to wait on it, most of it decompression
    that leaves other threads running. It runs at a lower priority unless ``urgent`` (the
    run's first turns will soon wait for it).
    """
    global _preloading
    if _load_identifier.cache_info().currsize == 0 and _preloading is None:
        _preloading = threading.Thread(target=_load_in_background, args=(not urgent,), name="docpilot-langid",
                                       daemon=True)
        _preloading.start()


_preloading: threading.Thread | None = None


def _load_in_background(lower: bool = True) -> None:
    # At a lower priority (Linux sets it per thread): the load is CPU work, and the
    # turns of a run that just started, and the model server beside it, come first.
    if lower:
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    # Only a head start: a load that fails here (a full disk) is made again by the first
    # detection, whose error the run reports; a thread's exception would be a traceback.
    with contextlib.suppress(Exception):
        _identifier()


def ready() -> bool:
    """Whether the language model is loaded, so that detecting a language will not wait for it."""
    return _load_identifier.cache_info().currsize > 0


def _identifier():
    with _LOADING:  # one load, however many threads ask at once
        return _load_identifier()


@lru_cache(maxsize=1)
def _load_identifier():
    return load_model()


def load_model():
    """py3langid's model, loaded from its packed file and restricted to ``CANDIDATES``."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    try:
        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    except OSError as exc:
        # py3langid unpacks its model (about 70 MB) into a temporary file rather than memory.
        raise StorageError(
            "temporary copy of the language model", exc.filename or tempfile.gettempdir(), exc,
            kept="the temporary file was removed; set TMPDIR to a folder with about 70 MB free to unpack it there",
        ) from None
    identifier.set_languages(list(CANDIDATES))
    return identifier


def detect_language(text: str | None) -> str | None:
    """The ISO 639-1 code of a text's language; None when there are no words or too few to tell.

    Remembered by text for the process: a run of several variants asks about each
    question once per variant, and a turn's texts are read when it is stored and again
    when it is scored, so a large run would otherwise detect each text several times.
    """
    if not text:
        return None
    return _detect(text)


@lru_cache(maxsize=16_384)
def _detect(text: str) -> str | None:
    cleaned = _MARKERS.sub(" ", text)
    words = re.findall(r"[^\W\d_]{2,}", cleaned)
    if not words:
        return None
    language, probability = _identifier().classify(cleaned)
    if len(words) < MIN_WORDS and probability < MIN_CONFIDENCE:
        return None  # a guess: the caller falls back to what it knows
    return language


def expected_language(record_language: str | None, question_language: str | None,
                      corpus_language: str | None) -> str | None:
    """The language an answer should be in: the record's, else the question's, else the corpus's."""
    return record_language or question_language or corpus_language


_CORPUS_LANGUAGES: dict[str, str | None] = {}


def corpus_language(corpus) -> str | None:
    """The language the docs are written in, detected once per corpus fingerprint from their text."""
    if corpus.fingerprint not in _CORPUS_LANGUAGES:
        sample, size = [], 0
        for section in corpus.sections.values():
            sample.append(section.text)
            size += len(section.text)
            if size >= _CORPUS_SAMPLE_CHARS:
                break
        _CORPUS_LANGUAGES.clear()  # one corpus per process at a time
        _CORPUS_LANGUAGES[corpus.fingerprint] = detect_language("\n".join(sample))
    return _CORPUS_LANGUAGES[corpus.fingerprint]
