"""BM25 over a corpus's chunks: every (term, chunk) weight computed once, a question scored by adding them up."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from docpilot.retrieval.tokens import terms


class LexicalIndex:
    """The BM25 weight of every (term, chunk) pair, precomputed: a sparse matrix stored by term.

    BM25 as Lucene computes it: a term's weight in a chunk is
    ``idf · tf / (tf + k1 · (1 − b + b · length / average length))`` with
    ``idf = ln(1 + (N − df + 0.5) / (df + 0.5))``, over the chunk's stemmed content
    words; a question's score is the sum of its terms' weights. The weights are
    float32, computed in float64 from a float32 idf, which gives bm25s's ``lucene``
    figures to the last bit (a test holds the two together). Column ``t`` of the
    matrix is ``data[indptr[t]:indptr[t + 1]]``, the chunks ``indices[...]`` in order.
    """

    _FILES = ("data", "indices", "indptr")

    def __init__(self, vocabulary: dict[str, int], data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 size: int) -> None:
        self.vocabulary = vocabulary
        self._data = data
        self._indices = indices
        self._indptr = indptr
        self.size = size
        self._best: np.ndarray | None = None  # each term's highest weight, made on first use

    @classmethod
    def build(cls, texts: Sequence[str], *, k1: float, b: float) -> LexicalIndex:
        """Index texts, one document each, as stemmed content words (an empty text still counts as one word)."""
        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        chunk_ids: list[int] = []
        counts: list[int] = []
        lengths = np.empty(len(texts), dtype=np.float64)
        for chunk, text in enumerate(texts):
            words = terms(text) or ["_empty_"]
            lengths[chunk] = len(words)
            for term, count in Counter(words).items():
                term_ids.append(vocabulary.setdefault(term, len(vocabulary)))
                chunk_ids.append(chunk)
                counts.append(count)
        term = np.asarray(term_ids, dtype=np.int64)
        chunk_of = np.asarray(chunk_ids, dtype=np.int32)
        tf = np.asarray(counts, dtype=np.float64)
        df = np.bincount(term, minlength=len(vocabulary)).astype(np.float64)
        n = len(texts)
        idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = k1 * ((1 - b) + b * lengths[chunk_of] / lengths.mean()) if n else np.zeros(0)
        weights = (idf[term].astype(np.float64) * (tf / (norm + tf))).astype(np.float32)
        order = np.lexsort((chunk_of, term))  # by term, then chunk
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(df.astype(np.int64), out=indptr[1:])
        return cls(vocabulary, weights[order], chunk_of[order], indptr, n)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in self._FILES:
            np.save(folder / f"{name}.npy", getattr(self, f"_{name}"), allow_pickle=False)
        (folder / "vocabulary.json").write_text(json.dumps({"size": self.size, "terms": list(self.vocabulary)}))

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex:
        """An index saved by ``save``; ValueError when the files are not what ``save`` writes (damaged, or foreign).

        The arrays load with ``allow_pickle=False`` and must have the dtypes and the
        layout ``build`` makes, so a search over them can neither run code nor index out of range.
        """
        saved = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
        data, indices, indptr = (np.load(folder / f"{name}.npy", allow_pickle=False) for name in cls._FILES)
        terms, size = _checked(saved, data, indices, indptr)
        vocabulary = {term: i for i, term in enumerate(terms)}
        if len(vocabulary) != len(terms):
            raise ValueError(f"{folder / 'vocabulary.json'}: a term is listed twice")
        return cls(vocabulary, data, indices, indptr, size)

    def frequency(self, term: int) -> int:
        """How many chunks hold the term of column ``term`` (its document frequency)."""
        return int(self._indptr[term + 1] - self._indptr[term])

    def holding(self, term: int) -> np.ndarray:
        """The chunks that hold the term of column ``term``, in ascending order."""
        return self._indices[self._indptr[term]:self._indptr[term + 1]]

    def best_possible(self, query: Sequence[str]) -> float:
        """The score of a chunk holding every query term at its highest weight in the index (repeats add up)."""
        if self._best is None:
            filled = self._indptr[1:] > self._indptr[:-1]
            best = np.zeros(len(self._indptr) - 1, dtype=np.float32)
            best[filled] = np.maximum.reduceat(self._data, self._indptr[:-1][filled])
            self._best = best
        return float(sum(self._best[self.vocabulary[t]] for t in query if t in self.vocabulary))

    def scores(self, query: Sequence[str]) -> np.ndarray | None:
        """Each chunk's BM25 score for the query terms (repeats add up); None when no term is known."""
        ids = [self.vocabulary[t] for t in query if t in self.vocabulary]
        if not ids:
            return None
        scores = np.zeros(self.size, dtype=np.float32)
        for term in ids:
            start, end = self._indptr[term], self._indptr[term + 1]
            # A chunk appears once per term column, so plain fancy-index addition is exact.
            scores[self._indices[start:end]] += self._data[start:end]
        return scores


def _checked(saved: object, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray) -> tuple[list[str], int]:
    """The terms and chunk count of a saved index whose parts agree with each other as ``build`` makes them."""
    if not isinstance(saved, dict) or not isinstance(saved.get("terms"), list) or type(saved.get("size")) is not int:
        raise ValueError("vocabulary.json is not the index's vocabulary")
    terms, size = saved["terms"], saved["size"]
    if not all(isinstance(term, str) for term in terms) or size < 0:
        raise ValueError("vocabulary.json is not the index's vocabulary")
    if (data.dtype != np.float32 or indices.dtype != np.int32 or indptr.dtype != np.int64
            or data.ndim != 1 or data.shape != indices.shape or indptr.shape != (len(terms) + 1,)):
        raise ValueError("the BM25 arrays do not have the types and lengths an index has")
    if indptr[0] != 0 or indptr[-1] != len(data) or bool(np.any(np.diff(indptr) < 0)):
        raise ValueError("the BM25 column offsets do not span the weights")
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= size):
        raise ValueError("the BM25 weights name chunks the index does not have")
    return terms, size
