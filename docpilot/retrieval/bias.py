"""How much a golden question borrows from the passage that answers it: the bias of a set written beside the docs.

A question written while looking at the passage reuses its words, and keyword
retrieval then looks better on it than on the questions users type (Karpukhin et al.
2020: on SQuAD, written that way, BM25 beats a dense retriever; on Natural Questions,
real users' questions, it loses by far). Four figures per positive, and their means
for the set, say how far a set leans that way:

- **overlap**: the share of the question's content words found in its gold section
  (heading path and text, as BM25 reads them), each word weighted by its BM25 idf
  over the docs' chunks, so a rare word copied counts more than a common one; the
  best of the record's gold sections. ``docpilot.metrics.slices.overlap_band`` sorts it
  into low, mid, high, and an eval reports recall per band (the report's ``bands``).
- **heading**: the share of the gold section's heading words that the question reuses.
- **leakage**: the share of the gold answer's content words that are in the question.
- **BM25 rank**: where plain BM25 over the chunks ranks the first section matching a
  gold entry (to ``DEPTH``), the rank keyword retrieval gets for free from copied words.

Words are the retriever's (``docpilot.retrieval.tokens.terms``: lowercased, stemmed,
stop words out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from docpilot.metrics.gold import is_relevant, is_under, matches
from docpilot.metrics.slices import BANDS, overlap_band
from docpilot.retrieval.tokens import terms

if TYPE_CHECKING:
    from docpilot.config.model import RetrievalConfig
    from docpilot.corpus.pages import Corpus, Section
    from docpilot.retrieval.bm25 import LexicalIndex
    from docpilot.schema import GoldenRecord

DEPTH = 100
"""How deep the BM25 ranking is searched for a gold section."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordBias(_Strict):
    """The bias figures of one positive."""

    id: str
    """The record's id."""
    overlap: float | None
    """IDF-weighted share of the question's content words found in its best gold section; None with no content word."""
    band: str | None
    """``low``, ``mid`` or ``high`` overlap (``BANDS``)."""
    heading: float | None
    """Share of the gold section's heading words the question reuses; None when the heading has none."""
    leakage: float | None
    """Share of the gold answer's content words found in the question; None without a gold answer."""
    bm25_rank: int | None
    """Rank plain BM25 gives the first section matching a gold entry; None when it is deeper than ``DEPTH``."""


class SetBias(_Strict):
    """The bias figures of a set: the means over its positives, and the BM25 ranks' spread."""

    positives: int
    """Positives measured."""
    overlap: float | None
    """Mean overlap."""
    bands: dict[str, int]
    """Positives per overlap band."""
    heading: float | None
    """Mean share of heading words reused."""
    leakage: float | None
    """Mean leakage, over the positives with a gold answer."""
    bm25_at_1: float | None
    """Share of positives whose gold BM25 ranks first."""
    bm25_in_8: float | None
    """Share of positives whose gold BM25 ranks in the top 8 (its recall@8 on single-section gold)."""
    bm25_median_rank: float | None
    """Median BM25 rank of the gold, a rank past ``DEPTH`` counted as ``DEPTH + 1``."""
    records: list[RecordBias]
    """Each positive's figures, in file order."""


class BiasMeter:
    """Measures questions against one corpus, over BM25 of its chunks as the retriever reads them.

    ``index`` is that BM25 when the caller has it (a run's retriever, built over the same
    ``lexical_text`` of the same chunks); without it the meter builds its own, the first
    time a figure needs it.
    """

    def __init__(self, corpus: Corpus, settings: RetrievalConfig, *, index: LexicalIndex | None = None) -> None:
        self.corpus = corpus
        self._settings = settings
        self._built = index
        self._idfs: dict[str, float] = {}
        self._sections_of: dict[str, list[Section]] = {}
        self._section_of = [c.section_id for c in corpus.chunks]
        self._chunks_of: dict[str, list[int]] = {}
        for n, chunk in enumerate(corpus.chunks):
            self._chunks_of.setdefault(chunk.section_id, []).append(n)

    @property
    def _index(self) -> LexicalIndex:
        if self._built is None:
            from docpilot.retrieval.bm25 import LexicalIndex
            from docpilot.retrieval.index import lexical_text

            texts = [lexical_text(self.corpus, c, self._settings) for c in self.corpus.chunks]
            self._built = LexicalIndex.build(texts, k1=self._settings.k1, b=self._settings.b)
        return self._built

    def overlap(self, record: GoldenRecord) -> float | None:
        """The record's overlap, rounded as ``RecordBias.overlap``; None without gold or content words."""
        return _round(self._best_overlap(set(terms(record.question)), self._gold_sections(record.gold)))

    def measure(self, record: GoldenRecord) -> RecordBias:
        """The figures of one positive."""
        question = set(terms(record.question))
        sections = self._gold_sections(record.gold)
        overlap = self._best_overlap(question, sections)
        headings = [set(terms(s.title or self.corpus.pages[s.page_id].title)) for s in sections]
        heading = max((v for h in headings if (v := _share(h, question)) is not None), default=None)
        answer = set(terms(record.gold_answer or ""))
        return RecordBias(
            id=record.id, overlap=_round(overlap), band=overlap_band(overlap), heading=_round(heading),
            leakage=_round(_share(answer, question)), bm25_rank=self._rank(record),
        )

    def measure_set(self, records: Sequence[GoldenRecord]) -> SetBias:
        """The figures of every positive of a set, and their summary."""
        measured = [self.measure(record) for record in records if record.gold]
        ranks = [m.bm25_rank or DEPTH + 1 for m in measured]
        bands = {name: sum(m.band == name for m in measured) for name, _ in BANDS}
        return SetBias(
            positives=len(measured),
            overlap=_mean([m.overlap for m in measured]),
            bands=bands,
            heading=_mean([m.heading for m in measured]),
            leakage=_mean([m.leakage for m in measured]),
            bm25_at_1=_round(sum(r == 1 for r in ranks) / len(ranks)) if ranks else None,
            bm25_in_8=_round(sum(r <= 8 for r in ranks) / len(ranks)) if ranks else None,
            bm25_median_rank=float(median(ranks)) if ranks else None,
            records=measured,
        )

    def _gold_sections(self, gold: Sequence[str]) -> list[Section]:
        """The sections matching any gold entry, each entry's looked up once per meter."""
        found: dict[str, Section] = {}
        for entry in gold:
            if entry not in self._sections_of:
                prefix = entry.partition("#")[0]
                self._sections_of[entry] = [s for page in self.corpus.pages.values() if is_under(page.id, prefix)
                                            for s in page.sections if matches(s.id, entry)]
            found.update((s.id, s) for s in self._sections_of[entry])
        return list(found.values())

    def _best_overlap(self, question: set[str], sections: Sequence[Section]) -> float | None:
        if not question:
            return None
        return max((self._overlap(question, s) for s in sections), default=None)

    def _overlap(self, question: set[str], section: Section) -> float:
        """IDF-weighted share of the question's words that the section's chunks hold (as BM25 reads them)."""
        chunks = np.asarray(self._chunks_of.get(section.id, []), dtype=np.int32)
        weights = {term: self._idf(term) for term in question}
        total = sum(weights.values())
        return sum(w for term, w in weights.items() if self._held(term, chunks)) / total if total else 0.0

    def _held(self, term: str, chunks: np.ndarray) -> bool:
        """Whether any of ``chunks`` holds the term: its column of the index names one of them."""
        column = self._index.vocabulary.get(term)
        if column is None or not len(chunks):
            return False
        holding = self._index.holding(column)
        places = np.searchsorted(holding, chunks)
        inside = places < len(holding)
        return bool(np.any(holding[places[inside]] == chunks[inside]))

    def _idf(self, term: str) -> float:
        """BM25's idf of a term over the chunks (the highest for a term no chunk holds)."""
        if term not in self._idfs:
            index = self._index
            column = index.vocabulary.get(term)
            df = 0 if column is None else index.frequency(column)
            size = max(index.size, 1)
            self._idfs[term] = math.log1p((size - df + 0.5) / (df + 0.5))
        return self._idfs[term]

    def _rank(self, record: GoldenRecord) -> int | None:
        scores = self._index.scores(terms(record.question))
        if scores is None:
            return None
        order = np.argsort(-scores, kind="stable")
        seen: set[str] = set()
        for chunk in order:
            if scores[chunk] <= 0:
                break
            section = self._section_of[chunk]
            if section in seen:
                continue
            seen.add(section)
            if is_relevant(section, record.gold):
                return len(seen)
            if len(seen) >= DEPTH:
                break
        return None


def _share(part: set[str], whole: set[str]) -> float | None:
    return len(part & whole) / len(part) if part else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return _round(sum(present) / len(present)) if present else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
