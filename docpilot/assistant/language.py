"""Offline language identification for questions and answers (py3langid's bundled model)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from functools import lru_cache

# Restricting the candidates keeps short questions from being read as rare languages.
CANDIDATES = (
    "en de fr es it pt nl sv da no fi pl cs ru uk tr ar he hi ja ko zh id vi el hu ro".split()
)
_MARKERS = re.compile(r"\[[^\]]*\]|`[^`]*`|https?://\S+")


_LOADING = threading.Lock()


def preload() -> None:
    """Load the language model in the background; a run that will detect languages starts it early.

    Loading takes about a second, most of it decompression that leaves other threads
    running.
    """
    if _load_identifier.cache_info().currsize == 0:
        threading.Thread(target=_load_in_background, name="docpilot-langid", daemon=True).start()


def _load_in_background() -> None:
    # At a lower priority (Linux sets it per thread): the load is a second of CPU, and
    # the turns of a run that just started, and the model server beside it, come first.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    _identifier()


def ready() -> bool:
    """Whether the language model is loaded, so that detecting a language will not wait for it."""
    return _load_identifier.cache_info().currsize > 0


def _identifier():
    with _LOADING:  # one load, however many threads ask at once
        return _load_identifier()


@lru_cache(maxsize=1)
def _load_identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    identifier.set_languages(list(CANDIDATES))
    return identifier


def detect_language(text: str | None) -> str | None:
    """The ISO 639-1 code of a text's language, or None when there are no words to read."""
    if not text:
        return None
    cleaned = _MARKERS.sub(" ", text)
    if not re.search(r"[^\W\d_]{2,}", cleaned):
        return None
    language, _ = _identifier().classify(cleaned)
    return language
