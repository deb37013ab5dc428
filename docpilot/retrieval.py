"""Ranking sections for a question with BM25 over chunks.

A chunk is indexed with its page title and heading path (repeated ``title_weight``
times, so a heading that names the topic counts), the page description, and its
text. A question's words are expanded with ``vocabulary.json`` before scoring. Chunk
scores fold into section scores (a section takes its best chunk), and the ranked
list keeps the top ``top_k`` sections.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

import bm25s
import numpy as np

from docpilot.config import RetrievalConfig
from docpilot.corpus import Corpus
from docpilot.errors import ConfigError
from docpilot.tokens import terms, words

RETRIEVERS = ("bm25",)

# bm25s narrates index builds at DEBUG level; a run's output is the scorecard alone.
logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Hit:
    """One ranked section with the chunk that earned its place."""

    section_id: str
    chunk_id: str
    score: float


def in_scope(page_id: str, scope: list[str] | None) -> bool:
    """Whether a page lies under one of the scope's page-id prefixes (None = everywhere)."""
    if scope is None:
        return True
    return any(page_id == p.rstrip("/") or page_id.startswith(p.rstrip("/") + "/") for p in scope)


class Retriever:
    """BM25 over a corpus's chunks; build once, search many times."""

    def __init__(self, corpus: Corpus, settings: RetrievalConfig | None = None) -> None:
        self.settings = settings or RetrievalConfig()
        if self.settings.retriever not in RETRIEVERS:
            raise ConfigError(
                f"unknown retriever {self.settings.retriever!r}",
                hint=f"set retrieval.retriever to one of: {', '.join(RETRIEVERS)}",
            )
        self.corpus = corpus
        self.chunks = corpus.chunks
        self._pages = np.array([c.page_id for c in self.chunks], dtype=object)
        self._vocabulary = self._expansions(corpus.vocabulary) if self.settings.use_vocabulary else {}
        tokens = [terms(self._indexed_text(c)) or ["_empty_"] for c in self.chunks]
        self._bm25 = bm25s.BM25(k1=self.settings.k1, b=self.settings.b)
        self._bm25.index(tokens, show_progress=False)
        self._known = self._bm25.vocab_dict
        self.fingerprint = hashlib.sha256(
            json.dumps([corpus.fingerprint, self.settings.model_dump()], sort_keys=True).encode()
        ).hexdigest()

    def _indexed_text(self, chunk) -> str:
        page = self.corpus.pages[chunk.page_id]
        heading = " ".join(chunk.heading_path)
        parts = [heading] * self.settings.title_weight
        if page.description:
            parts.append(page.description)
        if page.keywords:
            parts.append(" ".join(page.keywords))
        parts.append(chunk.text)
        return "\n".join(parts)

    @staticmethod
    def _expansions(vocabulary: dict[str, list[str]]) -> dict[tuple[str, ...], list[str]]:
        table: dict[tuple[str, ...], list[str]] = {}
        for phrase, targets in vocabulary.items():
            key = tuple(words(phrase))
            if key:
                table[key] = [t for target in targets for t in terms(target)]
        return table

    def query_terms(self, question: str) -> list[str]:
        """The question's stemmed terms plus the doc words ``vocabulary.json`` maps its words to."""
        base = words(question)
        extra: list[str] = []
        for phrase, targets in self._vocabulary.items():
            n = len(phrase)
            if any(tuple(base[i : i + n]) == phrase for i in range(len(base) - n + 1)):
                extra.extend(targets)
        return terms(question) + extra

    def search(self, question: str, *, scope: list[str] | None = None, k: int | None = None) -> list[Hit]:
        """The top ``k`` sections for a question, restricted to ``scope`` when given."""
        k = k or self.settings.top_k
        query = [t for t in self.query_terms(question) if t in self._known]
        if not query:
            return []
        scores = self._bm25.get_scores(query)
        if scope is not None:
            mask = np.fromiter((in_scope(p, scope) for p in self._pages), dtype=bool, count=len(self._pages))
            scores = np.where(mask, scores, 0.0)
        order = np.argsort(-scores, kind="stable")
        hits: list[Hit] = []
        seen: set[str] = set()
        for i in order:
            score = float(scores[i])
            if score <= 0.0:
                break
            chunk = self.chunks[i]
            if chunk.section_id in seen:
                continue
            seen.add(chunk.section_id)
            hits.append(Hit(chunk.section_id, chunk.id, round(score, 6)))
            if len(hits) == k:
                break
        return hits
