"""Words as the retriever and the extractive model see them: lowercased, stemmed, stop words out."""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[^\W_][\w]*", re.UNICODE)

# Lucene's English stop words plus question words: both carry no topic, and a
# question is mostly made of them.
STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the
    their then there these they this to was will with what how why when where which who
    whom whose does do did doing done can could should would may might must i me my we our
    you your yours its am been being have has had having get gets""".split()
)

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def words(text: str) -> list[str]:
    """The lowercased words of a text, stop words removed, not stemmed."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def terms(text: str) -> list[str]:
    """The stemmed content words of a text, in order, repeats kept."""
    return [_stem(w) for w in words(text)]
