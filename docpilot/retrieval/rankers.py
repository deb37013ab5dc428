"""Ranking sections for a question: BM25, embeddings, or both fused by reciprocal rank.

Three retrievers (``retrieval.retriever``) share one flow:

    bm25     the question's stemmed words, expanded with ``vocabulary.json``, scored
             against each chunk's heading path, page description and text, then
             multiplied by ``retrieval.reference_weight`` on reference pages
    dense    the question's embedding against each chunk's, by cosine similarity
    hybrid   both, fused: with ``fusion: rrf`` a section earns weight / (rrf_k + rank)
             from each ranked list it appears in; with ``fusion: scores`` a chunk that
             shares a word with the question scores
             bm25_weight · BM25 / best possible BM25 + dense_weight · (1 + cosine) / 2

Chunk scores fold into sections (a section takes its best chunk), sections outside
the question's ``scope`` never enter a list, and the top ``k`` sections are returned
as ``Hit``\\ s (``search_deeper`` adds the ids of the sections ranked after them).
Generated reference pages and release notes (``reference_pages``) hold at most
``reference_slots`` of the first ``top_k`` places, whatever the retriever.
The index behind a retriever is built in memory by the constructor, or loaded from
disk (and saved after a build) by ``Retriever.open``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docpilot.codebase import digest_code
from docpilot.config.model import RetrievalConfig
from docpilot.corpus.pages import Corpus
from docpilot.errors import ConfigError

# The one scope rule, shared with the scope-violation count and the server: ``/`` is the
# whole docs tree, and a prefix's slashes at either end do not matter.
from docpilot.metrics.gold import in_scope
from docpilot.retrieval.embedders import Embedder, build_embedder
from docpilot.retrieval.fusion import is_reference_page, reciprocal_rank_fusion
from docpilot.retrieval.index import (
    SearchIndex,
    build_index,
    open_index,
    uses_bm25,
    uses_vectors,
)
from docpilot.retrieval.tokens import terms, words

RETRIEVERS = ("bm25", "dense", "hybrid")
"""The names ``retrieval.retriever`` accepts."""
FUSIONS = ("rrf", "scores")
"""The names ``retrieval.fusion`` accepts."""

# Settings that change where or how fast an index is made, never a ranking.
_OPERATIONAL = frozenset({"index_dir", "embedding_batch_size", "embedding_timeout_s", "follow_ups"})
_BM25_ONLY = frozenset({"k1", "b", "title_weight", "description_weight", "use_vocabulary", "reference_weight"})
_DENSE_ONLY = frozenset({"embedder", "embedding_model", "embedding_base_url", "embedding_dim"})
_FUSION_ONLY = frozenset({"fusion", "rrf_k", "bm25_weight", "dense_weight", "fusion_depth"})
RANKING_CODE = ("docpilot.retrieval", "docpilot.corpus", "docpilot.metrics.gold")
"""The modules whose code decides a ranked list (search, fusion, caps, tokens, BM25, embedders, the
corpus's sections, the scope rule): their digest is part of the retriever's fingerprint."""
_SCOPE_MASKS = 256
_CAP_DEPTH = 4  # a capped list ranks this many times top_k sections, to fill the places given up


_Place = tuple[str, int, float]  # a ranked section: its id, the index of its best chunk, that chunk's score


@dataclass(frozen=True)
class Hit:
    """One ranked section with the chunk that earned its place."""

    section_id: str
    chunk_id: str
    score: float


def _checked(settings: RetrievalConfig) -> RetrievalConfig:
    if settings.retriever not in RETRIEVERS:
        raise ConfigError(
            f"unknown retriever {settings.retriever!r}",
            hint=f"set retrieval.retriever to one of: {', '.join(RETRIEVERS)}",
        )
    if settings.fusion not in FUSIONS:
        raise ConfigError(
            f"unknown fusion {settings.fusion!r}",
            hint=f"set retrieval.fusion to one of: {', '.join(FUSIONS)}",
        )
    return settings


def _ranking_settings(settings: RetrievalConfig) -> dict:
    """The settings that can change a ranked list with this retriever; the others stay out of its fingerprint."""
    unused = set(_OPERATIONAL)
    if not uses_bm25(settings):
        unused |= _BM25_ONLY
    if not uses_vectors(settings):
        unused |= _DENSE_ONLY
    if settings.retriever != "hybrid":
        unused |= _FUSION_ONLY
    return {k: v for k, v in settings.model_dump().items() if k not in unused}


class Retriever:
    """Ranks a corpus's sections for questions; build once, search many times."""

    def __init__(
        self,
        corpus: Corpus,
        settings: RetrievalConfig | None = None,
        *,
        embedder: Embedder | None = None,
        index: SearchIndex | None = None,
    ) -> None:
        self.settings = _checked(settings or RetrievalConfig())
        self.corpus = corpus
        self.chunks = corpus.chunks
        if embedder is None and uses_vectors(self.settings):
            embedder = build_embedder(self.settings)
        self.embedder = embedder
        self.index = index if index is not None else build_index(corpus, self.settings, self.embedder)
        self._lexical = self.index.lexical
        self._vectors = self.index.vectors
        self._vocabulary = self._expansions(corpus.vocabulary) if self.settings.use_vocabulary else {}
        page_ids = list(corpus.pages)
        number = {p: i for i, p in enumerate(page_ids)}
        self._page_ids = page_ids
        self._chunk_page = np.array([number[c.page_id] for c in self.chunks], dtype=np.int32)
        self._chunk_section = [c.section_id for c in self.chunks]
        self._reference = frozenset(p for p in page_ids if is_reference_page(p, self.settings.reference_pages))
        weights = np.array([self.settings.reference_weight if p in self._reference else 1.0 for p in page_ids])
        # Most docs folders have no reference pages; then BM25 scores stay untouched.
        self._chunk_weight = weights[self._chunk_page].astype(np.float32) if (weights != 1.0).any() else None
        self._masks: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        # The code is in it too: a ranking cached by other code is another code's ranking.
        self.fingerprint = hashlib.sha256(
            json.dumps(
                [corpus.fingerprint, self.index.fingerprint, _ranking_settings(self.settings),
                 digest_code(*RANKING_CODE)], sort_keys=True
            ).encode()
        ).hexdigest()

    @classmethod
    def open(
        cls,
        corpus: Corpus,
        settings: RetrievalConfig | None = None,
        *,
        cache_dir: str | Path = ".docpilot/cache",
        embedder: Embedder | None = None,
        rebuild: bool = False,
    ) -> Retriever:
        """A retriever over the saved index for this corpus and settings, built and saved when missing.

        The index lives in ``retrieval.index_dir``, or in ``index`` inside ``cache_dir``
        when that is empty; ``rebuild`` ignores a saved index and replaces it.
        """
        settings = _checked(settings or RetrievalConfig())
        if embedder is None and uses_vectors(settings):
            embedder = build_embedder(settings)
        directory = Path(settings.index_dir) if settings.index_dir else Path(cache_dir) / "index"
        index = open_index(corpus, settings, directory, embedder, rebuild=rebuild)
        return cls(corpus, settings, embedder=embedder, index=index)

    def with_vocabulary(self, vocabulary: dict[str, list[str]]) -> Retriever:
        """This retriever with ``vocabulary`` in place of the docs' ``vocabulary.json``: how an edited file would rank.

        The index is shared, nothing is rebuilt; the copy's fingerprint covers the vocabulary.
        """
        other = copy.copy(self)
        other._vocabulary = self._expansions(vocabulary) if self.settings.use_vocabulary else {}
        other.fingerprint = hashlib.sha256(
            json.dumps([self.fingerprint, vocabulary], sort_keys=True).encode()
        ).hexdigest()
        return other

    @staticmethod
    def _expansions(vocabulary: dict[str, list[str]]) -> dict[str, list[tuple[tuple[str, ...], list[str]]]]:
        """Vocabulary entries by the first word of their phrase, so a question checks only its own words."""
        table: dict[str, list[tuple[tuple[str, ...], list[str]]]] = {}
        for phrase, targets in vocabulary.items():
            key = tuple(words(phrase))
            if key:
                table.setdefault(key[0], []).append((key, [t for target in targets for t in terms(target)]))
        return table

    def query_terms(self, question: str) -> list[str]:
        """The question's stemmed terms plus the doc words ``vocabulary.json`` maps its words to."""
        base = words(question)
        extra: list[str] = []
        matched: set[tuple[str, ...]] = set()
        for i, word in enumerate(base):
            for phrase, targets in self._vocabulary.get(word, ()):
                # An entry adds its words once, however often the question repeats the phrase.
                if phrase not in matched and tuple(base[i : i + len(phrase)]) == phrase:
                    matched.add(phrase)
                    extra.extend(targets)
        return terms(question) + extra

    def search(self, question: str, *, scope: list[str] | None = None, k: int | None = None) -> list[Hit]:
        """The top ``k`` sections for a question, restricted to ``scope`` when given.

        Within the first ``top_k`` places at most ``reference_slots`` sections come from
        reference pages; the ones over that limit follow right after those places.
        """
        return self.search_deeper(question, scope=scope, k=k)[0]

    def search_deeper(
        self, question: str, *, scope: list[str] | None = None, k: int | None = None, depth: int = 0
    ) -> tuple[list[Hit], list[str]]:
        """The top ``k`` sections as ``search`` gives them, and the section ids ranked after them down to ``depth``.

        The deeper ids say how far a section missed by the top ``k`` sits. The top ``k``
        are the same at any depth: the reference cap reorders only the places ``search``
        has always ranked, and the deeper ones follow in their own order.
        """
        k = k or self.settings.top_k
        mask = self._scope_mask(scope)
        if mask is not None and not mask.any():
            return [], []
        capped = bool(self._reference) and self.settings.reference_slots < self.settings.top_k
        # A capped list looks deeper, so the places a reference section gives up can be filled.
        cut = max(k, _CAP_DEPTH * self.settings.top_k) if capped else k
        ranking = self._ranked(question, mask, k, max(cut, depth))
        if capped:
            ranking = self._cap_references(ranking[:cut]) + ranking[cut:]
        # Only the top k become Hits: a deep list of them would cost more than ranking it.
        hits = [Hit(section, self.chunks[i].id, round(score, 6)) for section, i, score in ranking[:k]]
        return hits, [place[0] for place in ranking[k:depth]]

    def _ranked(self, question: str, mask: np.ndarray | None, k: int, want: int) -> list[_Place]:
        """The ``want`` best sections; hybrid fuses lists as deep as ``k`` asks (or ``fusion_depth``)."""
        retriever = self.settings.retriever
        if retriever == "bm25":
            return self._lexical_ranking(question, mask, want)
        if retriever == "dense":
            return self._dense_ranking(question, mask, want)
        if self.settings.fusion == "scores":
            return self._score_fused_ranking(question, mask, want)
        depth = max(k, self.settings.fusion_depth)
        lists = [self._lexical_ranking(question, mask, depth), self._dense_ranking(question, mask, depth)]
        chunk_of: dict[str, int] = {}
        for ranking in lists:
            for section, chunk, _ in ranking:
                chunk_of.setdefault(section, chunk)
        weights = [self.settings.bm25_weight, self.settings.dense_weight]
        fused = reciprocal_rank_fusion(
            [[place[0] for place in ranking] for ranking in lists], weights, k=self.settings.rrf_k
        )
        return [(section, chunk_of[section], score) for section, score in fused[:want]]

    def _cap_references(self, ranking: list[_Place]) -> list[_Place]:
        """The ranked list with reference sections over ``reference_slots`` moved below the first ``top_k``."""
        places, slots = self.settings.top_k, self.settings.reference_slots
        first: list[_Place] = []
        waiting: list[_Place] = []
        used = seen = 0
        for place in ranking:
            if len(first) == places:
                break
            seen += 1
            if place[0].partition("#")[0] not in self._reference:
                first.append(place)
            elif used < slots:
                first.append(place)
                used += 1
            else:
                waiting.append(place)
        # With too few other sections the places stay short: the waiting ones follow anyway.
        return first + waiting + ranking[seen:]

    def _scope_mask(self, scope: list[str] | None) -> np.ndarray | None:
        """Which chunks a scope allows (None: all); masks are kept for the most recent scopes."""
        if scope is None:
            return None
        key = tuple(scope)
        mask = self._masks.get(key)
        if mask is None:
            pages = np.fromiter((in_scope(p, scope) for p in self._page_ids), dtype=bool, count=len(self._page_ids))
            mask = pages[self._chunk_page]
            self._masks[key] = mask
            if len(self._masks) > _SCOPE_MASKS:
                self._masks.popitem(last=False)
        else:
            self._masks.move_to_end(key)
        return mask

    def _bm25_scores(self, query: list[str], mask: np.ndarray | None) -> np.ndarray | None:
        """Each chunk's BM25 score for the query terms, reference pages weighted, 0 outside the scope."""
        scores = self._lexical.scores(query)
        if scores is None:
            return None
        if self._chunk_weight is not None:
            scores *= self._chunk_weight
        if mask is not None:
            scores[~mask] = 0.0
        return scores

    def _lexical_ranking(self, question: str, mask: np.ndarray | None, k: int) -> list[_Place]:
        if self._lexical is None:
            return []
        scores = self._bm25_scores(self.query_terms(question), mask)
        if scores is None:
            return []
        # A chunk sharing no word with the question scores 0 and is no answer.
        return self._top_sections(scores, k, floor=0.0)

    def _score_fused_ranking(self, question: str, mask: np.ndarray | None, k: int) -> list[_Place]:
        """Chunks that share a word with the question, by bm25_weight · share + dense_weight · closeness.

            share      BM25 score / the best BM25 score possible for these query terms
            closeness  (1 + cosine) / 2

        Both lie in [0, 1], so the weights say how much each counts, and a question whose
        words match weakly everywhere leaves more of the ranking to the embedding.
        """
        if self._lexical is None or self._vectors is None or self.embedder is None:
            return []
        query = self.query_terms(question)
        scores = self._bm25_scores(query, mask)
        if scores is None:
            return []
        alive = np.flatnonzero(scores > 0.0)
        best = self._lexical.best_possible(query)
        vector = self.embedder.embed([question])[0]
        cosine = np.einsum("ij,j->i", self._vectors, vector)  # see _dense_ranking for why einsum
        fused = np.full(len(scores), -np.inf, dtype=np.float32)
        share, closeness = scores[alive] / best, (1.0 + cosine[alive]) / 2.0
        fused[alive] = self.settings.bm25_weight * share + self.settings.dense_weight * closeness
        return self._top_sections(fused, k, floor=-np.inf)

    def _dense_ranking(self, question: str, mask: np.ndarray | None, k: int) -> list[_Place]:
        if self._vectors is None or self.embedder is None or not question.strip():
            return []
        query = self.embedder.embed([question])[0]
        # einsum stays on one thread; a BLAS matrix-vector product spreads over all cores,
        # which on a loaded machine makes it the slower of the two.
        scores = np.einsum("ij,j->i", self._vectors, query)
        if mask is not None:
            scores[~mask] = -np.inf
        return self._top_sections(scores, k, floor=-np.inf)

    def _top_sections(self, scores: np.ndarray, k: int, *, floor: float) -> list[_Place]:
        """The best ``k`` distinct sections by their best chunk; chunks at or below ``floor`` never count.

        Only the leading chunks are sorted (a section may own several of them, so the
        cut widens until ``k`` sections are found); equal scores keep corpus order.
        """
        alive = np.flatnonzero(scores > floor)
        want = k * 4
        while True:
            chosen = alive
            if len(alive) > want:
                part = alive[np.argpartition(-scores[alive], want - 1)[:want]]
                chosen = alive[scores[alive] >= scores[part].min()]  # keep every tie at the cut
            order = chosen[np.lexsort((chosen, -scores[chosen]))]
            ranking: list[_Place] = []
            seen: set[str] = set()
            sections = self._chunk_section
            # Plain ints and floats: indexing numpy scalar by scalar costs more than the ranking
            # itself once a list runs a hundred sections deep.
            for i, score in zip(order.tolist(), scores[order].tolist(), strict=True):
                section = sections[i]
                if section not in seen:
                    seen.add(section)
                    ranking.append((section, i, score))
                    if len(ranking) == k:
                        return ranking
            if len(chosen) == len(alive):
                return ranking
            want *= 4
