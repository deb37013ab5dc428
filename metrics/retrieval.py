"""Retrieval metrics: was the right section found, and how high was it ranked.

Each function scores one record from its ranked section ids (best first) and its
gold entries; ``metrics.summary`` averages them over the positives. Relevance is
binary: a section is relevant when it matches any gold entry (``metrics.gold``).
Repeated gold entries count once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from metrics.gold import is_relevant, matches, unique


def recall_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold entries matched by at least one of the top ``k`` sections.

        recall@k = |{g ∈ gold : ∃ s ∈ retrieved[:k], s matches g}| / |gold|

    One section may satisfy several entries (a page pin and a section of that page).
    """
    entries = unique(gold)
    top = retrieved[:k]
    found = sum(1 for entry in entries if any(matches(s, entry) for s in top))
    return found / len(entries)


def reciprocal_rank(retrieved: Sequence[str], gold: Sequence[str]) -> float:
    """One over the rank of the first relevant section; 0 when none is relevant.

        RR = 1 / min{i : retrieved[i-1] is relevant}, or 0
    """
    for rank, section in enumerate(retrieved, start=1):
        if is_relevant(section, gold):
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Normalised discounted cumulative gain with binary relevance, at cutoff ``k``.

        DCG@k  = Σ_{i credited} 1 / log2(i + 1)
        IDCG@k = Σ_{i=1..min(|gold|, k)} 1 / log2(i + 1)
        nDCG@k = DCG@k / IDCG@k

    Each gold entry earns its gain once, at the first rank that matches it, so a page
    pin covered by three sections earns one gain, not three.

    Overlapping entries: a section can match more than one entry (``guide/auth`` and
    ``guide/auth#request`` both match ``guide/auth#request``). Crediting every entry
    it matches would let one section earn several gains at one rank, while IDCG
    assumes one entry per rank, and the score could pass 1. Here a section credits
    at most one entry, and the entries are assigned to ranks so as to give the
    largest DCG (a rank-ordered augmenting-path matching, which is optimal because
    the gain depends on the rank alone). When no section matches two entries, which
    is always the case with exact section pins, this is exactly "each entry at the
    first rank that matches it", the trec_eval ``ndcg_cut`` value. The score stays in
    [0, 1] and is 1 only when the top min(|gold|, k) ranks each serve a distinct entry.
    """
    entries = unique(gold)
    top = list(retrieved[:k])
    owner: dict[str, int] = {}  # gold entry -> the rank index crediting it
    dcg = 0.0
    for index in range(len(top)):
        if _credit(index, top, entries, owner, set()):
            dcg += 1.0 / math.log2(index + 2)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(entries), k) + 1))
    return dcg / ideal


def _credit(
    index: int, top: list[str], entries: list[str], owner: dict[str, int], seen: set[str]
) -> bool:
    """Find an entry for rank ``index``, moving earlier ranks to other entries if needed."""
    for entry in entries:
        if entry in seen or not matches(top[index], entry):
            continue
        seen.add(entry)
        holder = owner.get(entry)
        if holder is None or _credit(holder, top, entries, owner, seen):
            owner[entry] = index
            return True
    return False


def context_precision_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """RAGAS context precision over the top ``k``: mean precision@i at the relevant ranks.

        CP@k = Σ_{i ≤ k} precision@i · rel_i / Σ_{i ≤ k} rel_i,   0 when no rel_i = 1
        precision@i = (Σ_{j ≤ i} rel_j) / i

    A relevant section at rank 1 is worth more than at rank 5, and noise above a hit
    lowers the score.
    """
    hits = 0
    total = 0.0
    for rank, section in enumerate(retrieved[:k], start=1):
        if is_relevant(section, gold):
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0
