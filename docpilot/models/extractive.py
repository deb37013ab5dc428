"""The offline baseline: answers by quoting the primed sentences that best match the question.

It is deterministic, needs no network, and is honest about being a baseline: it
cannot paraphrase, combine facts or follow an argument. For each sentence of each
numbered source it computes the question's IDF-weighted term coverage

    coverage(s) = Σ idf(t) over question terms t found in s  /  Σ idf(t) over question terms

(terms found only in the source's headings count half). When the best coverage is
below ``min_evidence`` it refuses with ``REFUSE: not-answerable``; otherwise it
answers with up to ``max_sentences`` of the best sentences, each followed by its
source's ``[n]`` marker, streamed word by word.

Code is never scored, but a chosen sentence that introduces a code block ("run:",
"as shown below", "the following", a trailing colon) keeps the block right after it
when it holds at most ``max_code_lines`` lines: for command-line docs the command is
the answer.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from docpilot.corpus.markdown import split_blocks
from docpilot.models.base import Prompt, Reply, Turn, paints, read_reply
from docpilot.retrieval.tokens import terms

if TYPE_CHECKING:
    from docpilot.config.model import ModelConfig
    from docpilot.corpus.pages import Corpus

_FENCE = re.compile(r"^(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*_0-9])")
_MARKUP = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|#{1,6}\s+|>\s*|!!!\s*\w+\s*|:::\w*\s*)")
# Brackets in quoted doc text would read as citation markers once quoted.
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,200})\](?!\()")
# A sentence that points at what follows it: "run:", "as shown below", "the following".
_INTRODUCES = re.compile(r":$|\b(?:as shown below|shown below|as follows|the following)\b", re.IGNORECASE)
REFUSAL = "REFUSE: not-answerable\nThe documentation does not answer this question."


def document_frequencies(texts: list[str]) -> dict[str, float]:
    """IDF of each term over a list of texts (the corpus's chunks): ln(1 + N / df)."""
    df: dict[str, int] = {}
    for text in texts:
        for t in set(terms(text)):
            df[t] = df.get(t, 0) + 1
    n = max(len(texts), 1)
    return {t: math.log(1 + n / d) for t, d in df.items()}


def _sentences(text: str, max_code_lines: int = 0) -> list[tuple[str, str | None]]:
    """The source's prose sentences, each with the code block it introduces (None for most).

    Code and tables read badly as prose, so they are never sentences; a block of at
    most ``max_code_lines`` lines right after a sentence that introduces it rides
    with that sentence, as written.
    """
    out: list[tuple[str, str | None]] = []
    introducing: int | None = None  # the sentence just before, when it introduces what follows
    for block in split_blocks(text):
        lines: list[str] = []
        code: list[str] | None = None
        for line in block.split("\n"):
            if code is not None:
                code.append(line)
                if _FENCE.match(line.strip()) and len(code) > 1:
                    _attach(out, introducing, code, max_code_lines)
                    code, introducing = None, None
                continue
            if _FENCE.match(line.strip()):
                introducing = _add_sentences(out, lines) if lines else introducing
                lines, code = [], [line]
            elif line.strip().startswith("|"):
                introducing = _add_sentences(out, lines) if lines else introducing
                lines, introducing = [], None
            else:
                lines.append(line)
        if lines:
            introducing = _add_sentences(out, lines)
        elif code is not None:
            introducing = None  # a fence cut off by the end of the chunk
    return out


@functools.lru_cache(maxsize=8192)
def _read_source(text: str, max_code_lines: int) -> tuple[tuple[str, str | None, frozenset[str]], ...]:
    """A source's sentences, each with its code block and its terms: a memo of a pure function.

    The same sections are primed for question after question, so a served assistant reads
    each one once instead of splitting and stemming it again on every turn.
    """
    return tuple((sentence, code, frozenset(terms(sentence))) for sentence, code in _sentences(text, max_code_lines))


def _add_sentences(out: list[tuple[str, str | None]], lines: list[str]) -> int | None:
    """Add the sentences of prose lines; the index of the last one when it introduces what follows."""
    last: int | None = None
    for line in _list_items(lines):
        for sentence in _SENTENCE_END.split(line):
            sentence = _BRACKETED.sub(r"(\1)", _MARKUP.sub("", sentence)).strip()
            if len(sentence.split()) >= 4:
                out.append((sentence, None))
                last = len(out) - 1
            elif sentence:
                last = None
    return last if last is not None and _INTRODUCES.search(out[last][0]) else None


def _attach(out: list[tuple[str, str | None]], introducing: int | None, code: list[str], most: int) -> None:
    body = code[1:-1]
    if introducing is not None and 0 < len(body) <= most and any(line.strip() for line in body):
        out[introducing] = (out[introducing][0], "\n".join(code))


def _list_items(lines: list[str]) -> list[str]:
    # A list item starts a new line of prose; wrapped lines join the one before.
    items: list[str] = []
    for line in lines:
        if _MARKUP.match(line) or not items:
            items.append(line.strip())
        else:
            items[-1] += " " + line.strip()
    return items


class ExtractiveModel:
    """The offline baseline model (see the module docstring)."""

    def __init__(
        self,
        *,
        idf: Mapping[str, float] | None = None,
        min_evidence: float = 0.5,
        max_sentences: int = 3,
        max_code_lines: int = 3,
    ) -> None:
        self.idf = idf or {}
        self.min_evidence = min_evidence
        self.max_sentences = max_sentences
        self.max_code_lines = max_code_lines
        self._unseen = max(self.idf.values(), default=1.0)

    def _weight(self, term: str) -> float:
        return self.idf.get(term, self._unseen)

    def compose(self, prompt: Prompt) -> str:
        """The full reply for a prompt: cited sentences, or the refusal line."""
        question = set(terms(prompt.question))
        total = sum(self._weight(t) for t in question)
        if not question or total == 0:
            return REFUSAL
        scored: list[tuple[float, int, int, str, str | None]] = []
        for source in prompt.sources:
            heading = set(terms(source.title))
            for i, (sentence, code, found) in enumerate(_read_source(source.text, self.max_code_lines)):
                gain = sum(self._weight(t) for t in question & found)
                gain += 0.5 * sum(self._weight(t) for t in (question & heading) - found)
                scored.append((gain / total, source.n, i, sentence, code))
        if not scored:
            return REFUSAL
        scored.sort(key=lambda s: (-s[0], s[1], s[2]))
        best = scored[0][0]
        if best < self.min_evidence:
            return REFUSAL
        chosen = [s for s in scored if s[0] >= 0.6 * best][: self.max_sentences]
        reply = ""
        for k, (_, n, _, sentence, code) in enumerate(chosen):
            # A code block stands apart: a blank line before it and after it.
            apart = k and (code or chosen[k - 1][4])
            reply += ("\n\n" if apart else " " if k else "") + f"{sentence} [{n}]"
            if code:
                reply += "\n\n" + code
        return reply

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        """The reply, a word at a time, as a streaming service would send it.

        It never awaits: the reply is computed on the CPU, and letting other turns
        interleave would charge their work to this turn's latency.
        """
        for piece in re.findall(r"\S+\s*", self.compose(prompt)):
            yield piece

    async def complete(self, prompt: Prompt) -> Turn:
        """Answer one prompt, timing the first word and the end of the turn."""
        start = time.perf_counter()
        first: float | None = None
        parts: list[str] = []
        async for piece in self.stream(prompt):
            if first is None and paints(piece):
                first = (time.perf_counter() - start) * 1000
            parts.append(piece)
        reply = Reply(
            answer="".join(parts).strip(),
            latency_ms=(time.perf_counter() - start) * 1000,
            first_token_ms=first,
            finish_reason="stop",
        )
        return read_reply(reply)  # the refusal line is read by the rule every model's replies are read by


def build(settings: ModelConfig, *, corpus: Corpus, idf: Mapping[str, float] | None = None) -> ExtractiveModel:
    """The extractive model of the settings, weighing words over ``corpus`` (or by ``idf``, counted already)."""
    return ExtractiveModel(
        idf=idf if idf is not None else document_frequencies([c.text for c in corpus.chunks]),
        min_evidence=settings.min_evidence,
        max_sentences=settings.max_sentences,
        max_code_lines=settings.max_code_lines,
    )


def identity(settings: ModelConfig, *, corpus_fingerprint: str, chunk_words: int) -> dict:
    """Its part of the cache key: it weighs words by their rarity over the corpus's chunks, as they are cut."""
    return {"corpus": corpus_fingerprint, "chunk_words": chunk_words, "min_evidence": settings.min_evidence,
            "max_sentences": settings.max_sentences, "max_code_lines": settings.max_code_lines}
