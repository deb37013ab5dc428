"""Retrieval metrics of many rows at once: gold matching once per record, then numpy over all rows.

A summary of 10,000 rows would otherwise match every ranked section against every
gold entry seven times, once per retrieval metric. Here each record's top
``RANK_DEPTH`` sections are judged once into three flags per rank:

    relevant   the section matches some gold entry          (recall of CP@5, MRR)
    found      how many gold entries are first matched here (recall@k)
    credited   nDCG credits the section with a gold entry   (nDCG@8)

and every metric is then a few array operations over all records. The arithmetic is
the per-record functions' own, operation for operation and in the same order (sums
are taken rank by rank, never pairwise), so each value equals what
``metrics.retrieval`` gives for that record to the last bit; a test holds them to it.

Most gold entries pin one section exactly (``guide/auth#request``); a record whose
entries all do is judged with set lookups. Page pins fall back to ``metrics.gold``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from docpilot.metrics.gold import matches, pins_one_section, unique
from docpilot.metrics.retrieval import (
    CONTEXT_PRECISION_CUTOFF,
    GAINS,
    IDEAL_DCG,
    RANK_DEPTH,
    RECALL_CUTOFFS,
    credited_ranks,
)

_NOTHING = (False,) * RANK_DEPTH
_NONE_FOUND = (0,) * RANK_DEPTH


@dataclass(frozen=True)
class Judged:
    """Every record's top ``RANK_DEPTH`` judged against its gold entries; one row per record."""

    relevant: np.ndarray
    """bool (records × RANK_DEPTH): the section at that rank matches a gold entry."""
    found: np.ndarray
    """int (records × RANK_DEPTH): gold entries whose first matching section is at that rank."""
    credited: np.ndarray
    """bool (records × RANK_DEPTH): nDCG credits the section at that rank."""
    entries: np.ndarray
    """int (records): distinct gold entries of the record."""


def judge_record(retrieved: Sequence[str], gold: Sequence[str]) -> tuple[tuple, tuple, tuple, int]:
    """One record's relevant, found and credited flags (padded to ``RANK_DEPTH``) and its entry count."""
    entries = unique(gold)
    top = retrieved[:RANK_DEPTH]
    pad = RANK_DEPTH - len(top)
    if all(pins_one_section(entry) for entry in entries):
        # Exact section pins: a section matches an entry only by being it, so each
        # entry is first found where its section first appears, and that is also
        # the rank nDCG credits.
        pinned = set(entries)
        relevant = [section in pinned for section in top]
        if len(set(top)) == len(top):
            found = relevant
        else:
            seen: set[str] = set()
            found = []
            for section, hit in zip(top, relevant, strict=True):
                found.append(hit and section not in seen)
                seen.add(section)
        return (*relevant, *_NOTHING[:pad]), (*found, *_NOTHING[:pad]), (*found, *_NOTHING[:pad]), len(entries)
    relevant = [any(matches(section, entry) for entry in entries) for section in top]
    found_at = [0] * RANK_DEPTH
    for entry in entries:
        rank = next((i for i, section in enumerate(top) if matches(section, entry)), None)
        if rank is not None:
            found_at[rank] += 1
    credited = credited_ranks(top, entries)
    return (*relevant, *_NOTHING[:pad]), tuple(found_at), (*credited, *_NOTHING[:pad]), len(entries)


def judge(records: Sequence[tuple[Sequence[str], Sequence[str]]]) -> Judged:
    """Judge every ``(retrieved, gold)`` pair; each gold list must hold at least one entry.

    Section ids and gold entries are numbered once (equal strings, equal numbers), so
    records whose entries all pin sections exactly are judged by comparing numbers
    across all records at once; the others go through ``judge_record``.
    """
    n = len(records)
    tops = [retrieved[:RANK_DEPTH] for retrieved, _ in records]
    golds = [gold for _, gold in records]
    ranked_ids = list(chain.from_iterable(tops))
    gold_ids = list(chain.from_iterable(golds))
    distinct_entries = dict.fromkeys(gold_ids)
    numbers = {text: code for code, text in enumerate(dict.fromkeys(chain(ranked_ids, distinct_entries)))}
    ranked = np.full((n, RANK_DEPTH), -1, dtype=np.int64)
    ranked[np.arange(RANK_DEPTH) < np.fromiter(map(len, tops), np.int64, n)[:, None]] = list(
        map(numbers.__getitem__, ranked_ids))
    width = max(map(len, golds), default=1) or 1
    pins = np.full((n, width), -2, dtype=np.int64)
    pins[np.arange(width) < np.fromiter(map(len, golds), np.int64, n)[:, None]] = list(
        map(numbers.__getitem__, gold_ids))
    # A record is judged by numbers when each of its entries pins one section (text after '#').
    # Two more slots, both True, for the paddings: index -2 (gold) and -1 (ranked).
    exact_number = np.ones(len(numbers) + 2, dtype=bool)
    for entry in distinct_entries:
        exact_number[numbers[entry]] = pins_one_section(entry)
    exact = exact_number[pins].all(axis=1)

    relevant = (ranked[:, :, None] == pins[:, None, :]).any(axis=2)
    earlier = np.tril(np.ones((RANK_DEPTH, RANK_DEPTH), dtype=bool), k=-1)  # [j, i]: rank i above rank j
    repeated = ((ranked[:, :, None] == ranked[:, None, :]) & earlier).any(axis=2)
    first = relevant & ~repeated
    found = first.astype(np.int64)
    credited = first.copy()
    ordered = np.sort(pins, axis=1)
    entries = ((ordered[:, 1:] != ordered[:, :-1]) & (ordered[:, 1:] >= 0)).sum(axis=1) + (ordered[:, 0] >= 0)
    for index in np.flatnonzero(~exact):
        relevant[index], found[index], credited[index], entries[index] = judge_record(*records[index])
    return Judged(relevant=relevant, found=found, credited=credited, entries=entries.astype(np.int64))


def recall_at(judged: Judged, k: int) -> np.ndarray:
    """recall@k of every record: entries first found in the top k / entries."""
    return judged.found[:, :min(k, RANK_DEPTH)].sum(axis=1) / judged.entries


def reciprocal_ranks(judged: Judged) -> np.ndarray:
    """Reciprocal rank of every record: 1 / rank of the first relevant section in the top 8, or 0."""
    any_relevant = judged.relevant.any(axis=1)
    first = judged.relevant.argmax(axis=1) + 1
    return np.where(any_relevant, 1.0 / first, 0.0)


def ndcg_at_8(judged: Judged) -> np.ndarray:
    """nDCG@8 of every record, credited ranks' gains added rank by rank as ``ndcg_at_k`` adds them."""
    dcg = np.zeros(len(judged.entries))
    for index in range(RANK_DEPTH):
        dcg = dcg + np.where(judged.credited[:, index], GAINS[index], 0.0)
    ideal = np.array(IDEAL_DCG)[np.minimum(judged.entries, RANK_DEPTH)]
    return dcg / ideal


def context_precision_at(judged: Judged, k: int = CONTEXT_PRECISION_CUTOFF) -> np.ndarray:
    """Context precision@k of every record, summed rank by rank as ``context_precision_at_k`` sums it."""
    k = min(k, RANK_DEPTH)
    relevant = judged.relevant[:, :k]
    hits = np.cumsum(relevant, axis=1)
    total = np.zeros(len(judged.entries))
    for index in range(k):
        total = total + np.where(relevant[:, index], hits[:, index] / (index + 1), 0.0)
    count = hits[:, -1] if k else np.zeros(len(judged.entries), dtype=np.int64)
    return np.where(count > 0, total / np.maximum(count, 1), 0.0)


def retrieval_scores(judged: Judged) -> dict[str, np.ndarray]:
    """Metric id → every record's value, for each retrieval metric of the registry."""
    scores = {f"recall@{k}": recall_at(judged, k) for k in RECALL_CUTOFFS}
    scores["mrr"] = reciprocal_ranks(judged)
    scores[f"ndcg@{RANK_DEPTH}"] = ndcg_at_8(judged)
    scores[f"context_precision@{CONTEXT_PRECISION_CUTOFF}"] = context_precision_at(judged)
    return scores
