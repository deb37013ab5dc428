"""BERT's uncased WordPiece tokenizer in plain Python, for the static embedder.

The static embedder looks up one vector per WordPiece token, so it must split text
exactly as all-MiniLM-L6-v2's tokenizer does: clean out control characters, put
spaces around CJK ideographs, strip accents, lowercase, split at whitespace and at
every punctuation character, then cut each word into the longest pieces the
vocabulary holds (``##`` marks a piece inside a word). A word longer than 100
characters, or one the vocabulary cannot spell, becomes ``[UNK]``. Doing it here
saves a dependency on the ``tokenizers`` package for what is a few dozen lines.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

UNKNOWN = "[UNK]"
_MAX_WORD_CHARS = 100
_PREFIX = "##"
_CACHE_LIMIT = 200_000


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT counts every non-alphanumeric printable ASCII character as punctuation, "$" and "^" too.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _normalised(char: str) -> str:
    """What BERT's normaliser and pre-tokeniser make of one character, with spaces where it splits."""
    code = ord(char)
    category = unicodedata.category(char)
    if char in "\t\n\r" or category == "Zs":
        return " "
    if code == 0 or code == 0xFFFD or category in ("Cc", "Cf"):
        return ""
    if _is_cjk(code):
        return f" {char} "
    bare = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn").lower()
    return "".join(f" {c} " if _is_punctuation(c) else c for c in bare)


class _Table(dict):
    """A ``str.translate`` table that works out each character the first time it is seen."""

    def __missing__(self, code: int) -> str:
        found = self[code] = _normalised(chr(code))
        return found


_TABLE = _Table()


class WordPiece:
    """Splits text into vocabulary ids the way BERT's uncased tokenizer does."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self._ids = {token: index for index, token in enumerate(vocabulary)}
        if UNKNOWN not in self._ids:
            raise ValueError(f"the vocabulary has no {UNKNOWN} token")
        self.unknown_id = self._ids[UNKNOWN]
        self._longest = max(len(token) for token in vocabulary)
        self._words: dict[str, list[int]] = {}

    def words(self, text: str) -> list[str]:
        """The text normalised and split at whitespace and punctuation."""
        # One translate pass does BERT's cleaning, accents, case and punctuation splits per
        # character; a table filled as characters appear keeps it at C speed.
        return text.translate(_TABLE).split()

    def ids(self, text: str, limit: int | None = None) -> list[int]:
        """The token ids of the text, unknown words included as ``unknown_id``, at most ``limit``."""
        out: list[int] = []
        for word in self.words(text):
            pieces = self._words.get(word)
            if pieces is None:
                pieces = self._split(word)
                if len(self._words) < _CACHE_LIMIT:
                    self._words[word] = pieces
            out.extend(pieces)
            if limit is not None and len(out) >= limit:
                return out[:limit]
        return out

    def _split(self, word: str) -> list[int]:
        """Greedy longest-match pieces of one word, or ``[UNK]`` when no split exists."""
        if len(word) > _MAX_WORD_CHARS:
            return [self.unknown_id]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            while end > start:
                candidate = word[start:end] if start == 0 else _PREFIX + word[start:end]
                found = self._ids.get(candidate)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return [self.unknown_id]
            start = end
        return pieces
