"""Pieces of a ranking that need no index: which pages are reference pages, and fusing ranked lists."""

from __future__ import annotations

from collections.abc import Sequence


def is_reference_page(page_id: str, names: Sequence[str]) -> bool:
    """Whether one of ``names`` is whole path parts of the page id.

    ``api-ref`` matches ``v3/api-ref/cli/flow`` and ``api-ref`` itself, never
    ``api-refs`` or ``my-api-ref``; ``v3/api-ref`` matches only that run of parts.
    """
    padded = f"/{page_id}/"
    return any(f"/{name}/" in padded for name in names)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], weights: Sequence[float] | None = None, *, k: int = 60
) -> list[tuple[str, float]]:
    """Fuse ranked lists of ids into one, best first, with each id's fused score.

        RRF(d) = Σ_lists w_l / (k + rank_l(d))      rank counted from 1

    An id missing from a list earns nothing from it. Equal scores keep the order of
    the id's best rank, then of the list it was first seen in.
    """
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for list_no, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            best[item] = min(best.get(item, (rank, list_no)), (rank, list_no))
    return sorted(scores.items(), key=lambda pair: (-pair[1], best[pair[0]]))
