"""One bound shared by several askers: ``split`` gives each its share.

A model endpoint's ``model.concurrency`` shared by the workers of a Dask cluster or by
the variants of a run that call one service, a server's ``--max-concurrency`` shared
by its worker processes: the shares add up to the bound, so whoever is asked sees the
number it was configured for, however many ask it.
"""

from __future__ import annotations


def split(total: int, parts: int) -> list[int]:
    """``total`` slots shared by ``parts`` askers: the shares add up to ``total`` and differ by at most one.

    With fewer slots than askers the first ``total`` get one each and the rest none
    (at least one slot is always given out).
    """
    total, parts = max(1, total), max(1, parts)
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]
