"""Cutting a long section into chunks of at most a given number of words.

Cuts fall at paragraph ends where possible, then at sentence ends (line ends inside
code), so a chunk reads as whole text.
"""

from __future__ import annotations

import re

from docpilot.corpus.markdown import split_blocks

_SENTENCE_BREAK = re.compile(r"((?<=[.!?])[ \t]+|\n)")
_LINE_BREAK = re.compile(r"(\n)")


def chunk_texts(text: str, limit: int) -> list[str]:
    """Cut section text into pieces of at most ``limit`` words, at paragraph or sentence ends."""
    if len(text.split()) <= limit:
        return [text]
    pieces: list[str] = []
    for block in split_blocks(text):
        if len(block.split()) <= limit:
            pieces.append(block)
        else:
            code = block.lstrip().startswith(("```", "~~~"))
            pieces.extend(_split_long(block, limit, _LINE_BREAK if code else _SENTENCE_BREAK))
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    for piece in pieces:
        words = len(piece.split())
        if current and count + words > limit:
            chunks.append("\n\n".join(current))
            current, count = [], 0
        current.append(piece)
        count += words
    if current:
        chunks.append("\n\n".join(current))
    return chunks or [""]


def _split_long(block: str, limit: int, breaks: re.Pattern[str]) -> list[str]:
    """Split one over-long paragraph into runs of whole sentences (or lines), each within limit."""
    parts = breaks.split(block)
    units: list[str] = []
    for i in range(0, len(parts), 2):
        unit = parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
        words = unit.split()
        if len(words) <= limit:
            units.append(unit)
        else:
            units.extend(" ".join(words[j : j + limit]) + " " for j in range(0, len(words), limit))
    out: list[str] = []
    # A chunk's units are gathered in a list and joined once: adding each to a string may copy
    # the chunk so far every time, and units without words never close one, so a chunk of a
    # long block of blank code lines could be a whole page long.
    current: list[str] = []
    chars = count = 0
    for unit in units:
        words = len(unit.split())
        if chars and count + words > limit:
            out.append("".join(current).strip())
            current, chars, count = [], 0, 0
        current.append(unit)
        chars += len(unit)
        count += words
    text = "".join(current).strip()
    if text:
        out.append(text)
    return out
