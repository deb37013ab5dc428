"""Retrieval metrics: was the right section found, and how high was it ranked.

Each function scores one record from its ranked section ids (best first) and its
gold entries; ``metrics.summary`` averages them over the positives. Relevance is
binary: a section is relevant when it matches any gold entry (``metrics.gold``).
Repeated gold entries count once.

A report's retrieval metrics read the top ``RANK_DEPTH`` sections only, whatever the
ranked list holds: a run with ``retrieval.top_k: 20`` ranks twenty, but its MRR is
still MRR@8, comparable with a run that ranked eight. The registry passes every
function the top ``RANK_DEPTH`` (``ranked_top``); the functions themselves take any
cutoff, so a benchmark can ask for nDCG@10 or recall@100.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from docpilot.metrics.gold import is_relevant, matches, pins_one_section, unique

RANK_DEPTH = 8
"""How many ranked sections every retrieval metric reads (DESIGN §6: the top 8)."""

RECALL_CUTOFFS: tuple[int, ...] = (1, 3, 5, RANK_DEPTH)
"""The k of every reported recall@k."""

CONTEXT_PRECISION_CUTOFF = 5
"""The k of context precision@k: the sections a model is shown by default."""


def ranked_top(retrieved: Sequence[str]) -> Sequence[str]:
    """The part of a ranked list every reported retrieval metric reads: its first ``RANK_DEPTH``."""
    return retrieved[:RANK_DEPTH]


def names_pages(retrieved: Sequence[str]) -> bool:
    """Whether a ranking's top names a page rather than a section: an id with no ``#`` (a target's page source)."""
    return any("#" not in section for section in retrieved[:RANK_DEPTH])


def as_read(retrieved: Sequence[str], gold: Sequence[str]) -> tuple[Sequence[str], Sequence[str]]:
    """The top of the ranking and the gold entries as the retrieval metrics read them.

    A ranking that names only sections is read as it is. One whose top names a page
    (``names_pages``) is read at page level, since a page cannot be told apart from its
    sections: each of the top ``RANK_DEPTH`` becomes its page id (``guide/auth#tokens``
    → ``guide/auth``, a page kept once, at its first rank), and each gold entry the page
    it names (``guide/auth#tokens`` and ``guide/auth#(top)`` → ``guide/auth#``, any section
    of that page; a bare ``guide/auth``, which takes nested pages too, stays). A page
    then counts as found when the ranking names it or one of its sections.

    >>> as_read(["guide/auth", "guide/auth#tokens", "guide/deploy#ci"], ["guide/auth#tokens"])
    (['guide/auth', 'guide/deploy'], ['guide/auth#'])
    """
    top = retrieved[:RANK_DEPTH]
    if not names_pages(top):
        return top, gold
    pages = list(dict.fromkeys(section.partition("#")[0] for section in top))
    lifted = unique(entry.partition("#")[0] + "#" if "#" in entry else entry for entry in gold)
    return pages, lifted


def first_relevant_rank(retrieved: Sequence[str], gold: Sequence[str], k: int = RANK_DEPTH) -> int | None:
    """1-based rank of the first section in the top ``k`` (8) that matches a gold entry; None if none does.

    When every entry pins one section, matching is equality, so a set answers it; otherwise
    each section is matched against each entry (``metrics.gold.matches``).
    """
    if all(map(pins_one_section, gold)):
        pinned = set(gold)
        return next((rank for rank, section in enumerate(retrieved[:k], start=1) if section in pinned), None)
    for rank, section in enumerate(retrieved[:k], start=1):
        if is_relevant(section, gold):
            return rank
    return None


def first_found(retrieved: Sequence[str], gold: Sequence[str], k: int = RANK_DEPTH) -> int | None:
    """1-based rank of the first gold match as the metrics read the ranking (``as_read``); None if none.

    A ranking whose top names pages is read at page level, so the rank is the page's among
    the pages it names; any other is searched ``k`` deep, as ``first_relevant_rank``.
    """
    if names_pages(retrieved):
        return first_relevant_rank(*as_read(retrieved, gold))
    return first_relevant_rank(retrieved, gold, k)


def recall_at_k(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold entries matched by at least one of the top ``k`` sections.

        recall@k = |{g ∈ gold : ∃ s ∈ retrieved[:k], s matches g}| / |gold|

    One section may satisfy several entries (a page pin and a section of that page).
    """
    entries = unique(gold)
    top = retrieved[:k]
    found = sum(1 for entry in entries if any(matches(s, entry) for s in top))
    return found / len(entries)


def reciprocal_rank(retrieved: Sequence[str], gold: Sequence[str], k: int = RANK_DEPTH) -> float:
    """One over the rank of the first relevant section in the top ``k`` (8); 0 when none is.

        RR@k = 1 / min{i ≤ k : retrieved[i-1] is relevant}, or 0
    """
    rank = first_relevant_rank(retrieved, gold, k)
    return 0.0 if rank is None else 1.0 / rank


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
    dcg = 0.0
    for index, credited in enumerate(credited_ranks(retrieved[:k], entries)):
        if credited:
            dcg += gain(index)
    return dcg / ideal_dcg(min(len(entries), k))


GAINS: tuple[float, ...] = tuple(1.0 / math.log2(i + 1) for i in range(1, RANK_DEPTH + 1))
"""Gain of a credited section at ranks 1 … ``RANK_DEPTH``: 1 / log2(rank + 1)."""

IDEAL_DCG: tuple[float, ...] = tuple(sum(GAINS[:m]) for m in range(RANK_DEPTH + 1))
"""The ideal DCG of a record with ``m`` distinct gold entries, at index ``min(m, 8)``."""


def gain(index: int) -> float:
    """The gain of a credited section at 0-based rank ``index``: 1 / log2(index + 2)."""
    return GAINS[index] if index < RANK_DEPTH else 1.0 / math.log2(index + 2)


def ideal_dcg(m: int) -> float:
    """The DCG of ``m`` credited sections at the top ranks, summed rank by rank."""
    return IDEAL_DCG[m] if m <= RANK_DEPTH else sum(gain(i) for i in range(m))


def credited_ranks(top: Sequence[str], entries: Sequence[str]) -> list[bool]:
    """For each ranked section, whether nDCG credits it with a gold entry (see ``ndcg_at_k``).

    ``entries`` are distinct. Each section credits at most one entry and each entry is
    credited once, assigned so that the credited ranks give the largest DCG.
    """
    top = list(top)
    owner: dict[str, int] = {}  # gold entry -> the rank index crediting it
    return [_credit(index, top, entries, owner, set()) for index in range(len(top))]


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
