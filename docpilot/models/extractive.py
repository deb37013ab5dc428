"""The offline baseline: answers by quoting the primed sentences that best match the question.

It is deterministic, needs no network, and is honest about being a baseline: it
cannot paraphrase, combine facts or follow an argument. For each sentence of each
numbered source it computes the question's IDF-weighted term coverage

    coverage(s) = Σ idf(t) over question terms t found in s  /  Σ idf(t) over question terms

(terms found only in the source's headings count half). When the best coverage is
below ``min_evidence`` it refuses with ``REFUSE: not-answerable``; otherwise it
answers with up to ``max_sentences`` of the best sentences, each followed by its
source's ``[n]`` marker, streamed word by word.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

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
REFUSAL = "REFUSE: not-answerable\nThe documentation does not answer this question."


def document_frequencies(texts: list[str]) -> dict[str, float]:
    """IDF of each term over a list of texts (the corpus's chunks): ln(1 + N / df)."""
    df: dict[str, int] = {}
    for text in texts:
        for t in set(terms(text)):
            df[t] = df.get(t, 0) + 1
    n = max(len(texts), 1)
    return {t: math.log(1 + n / d) for t, d in df.items()}


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    in_fence = False
    for block in re.split(r"\n\s*\n", text):
        lines = []
        for line in block.splitlines():
            if _FENCE.match(line.strip()):
                in_fence = not in_fence
                continue
            if in_fence or line.strip().startswith("|"):
                continue  # code and tables read badly as prose
            lines.append(line)
        for line in _list_items(lines):
            for sentence in _SENTENCE_END.split(line):
                sentence = _BRACKETED.sub(r"(\1)", _MARKUP.sub("", sentence)).strip()
                if len(sentence.split()) >= 4:
                    out.append(sentence)
    return out


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
    ) -> None:
        self.idf = idf or {}
        self.min_evidence = min_evidence
        self.max_sentences = max_sentences
        self._unseen = max(self.idf.values(), default=1.0)

    def _weight(self, term: str) -> float:
        return self.idf.get(term, self._unseen)

    def compose(self, prompt: Prompt) -> str:
        """The full reply for a prompt: cited sentences, or the refusal line."""
        question = set(terms(prompt.question))
        total = sum(self._weight(t) for t in question)
        if not question or total == 0:
            return REFUSAL
        scored: list[tuple[float, int, int, str]] = []
        for source in prompt.sources:
            heading = set(terms(source.title))
            for i, sentence in enumerate(_sentences(source.text)):
                found = set(terms(sentence))
                gain = sum(self._weight(t) for t in question & found)
                gain += 0.5 * sum(self._weight(t) for t in (question & heading) - found)
                scored.append((gain / total, source.n, i, sentence))
        if not scored:
            return REFUSAL
        scored.sort(key=lambda s: (-s[0], s[1], s[2]))
        best = scored[0][0]
        if best < self.min_evidence:
            return REFUSAL
        chosen = [s for s in scored if s[0] >= 0.6 * best][: self.max_sentences]
        return " ".join(f"{sentence} [{n}]" for _, n, _, sentence in chosen)

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
    )


def identity(settings: ModelConfig, *, corpus_fingerprint: str, chunk_words: int) -> dict:
    """Its part of the cache key: it weighs words by their rarity over the corpus's chunks, as they are cut."""
    return {"corpus": corpus_fingerprint, "chunk_words": chunk_words, "min_evidence": settings.min_evidence,
            "max_sentences": settings.max_sentences}
