"""Pooling token vectors into text vectors: each text's rows of a token table, summed, in numpy alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Texts are summed in groups of at most this many tokens and texts, so a group's count
# matrix (texts × distinct tokens) stays near 16 MB however many texts come at once.
_TOKENS_PER_GROUP = 16_384
_TEXTS_PER_GROUP = 128


def sum_token_vectors(table: np.ndarray, rows: Sequence[Sequence[int]]) -> np.ndarray:
    """The sum of ``table``'s rows for each text's token ids, one float32 row per text (zero for no tokens).

        sums[t] = Σ_{i ∈ rows[t]} table[i]
    """
    sums = np.zeros((len(rows), table.shape[1]), dtype=np.float32)
    start = 0
    while start < len(rows):
        stop, tokens = start, 0
        while stop < len(rows) and (stop == start or (
                stop - start < _TEXTS_PER_GROUP and tokens + len(rows[stop]) <= _TOKENS_PER_GROUP)):
            tokens += len(rows[stop])
            stop += 1
        sums[start:stop] = _group_sums(table, rows[start:stop])
        start = stop
    return sums


def _group_sums(table: np.ndarray, rows: Sequence[Sequence[int]]) -> np.ndarray:
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(lengths.sum()))
    if ids.size == 0:
        return np.zeros((len(rows), table.shape[1]), dtype=np.float32)
    # A page repeats its words: count each distinct token per text, then one small dense
    # product (texts × distinct tokens) @ (distinct tokens × dim) sums them all.
    distinct, column = np.unique(ids, return_inverse=True)
    text = np.repeat(np.arange(len(rows)), lengths)
    counts = np.bincount(text * distinct.size + column, minlength=len(rows) * distinct.size)
    return counts.reshape(len(rows), distinct.size).astype(np.float32) @ table[distinct]
